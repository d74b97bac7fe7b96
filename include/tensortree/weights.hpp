// Weight publication: a learner publishes versions of a parameter tree into shared memory on this
// node, and actors in other processes read the newest complete version without a message and
// without a copy they did not ask for.
//
//   learner:  WeightPublisher publisher("policy");   // /dev/shm/tensortree-weights-policy, at publish
//             publisher.publish(params);                      // version 1, 2, ...
//   actor:    WeightSubscriber subscriber("policy");
//             WeightLease lease = subscriber.latest();        // zero-copy views of the newest version
//             act(lease.tree(), lease.version());             // the slot stays untouched meanwhile
//
// The publication is one file (/dev/shm/tensortree-weights-<name> for a plain name, as replay
// buffers are /dev/shm/tensortree-replay-<name>; anywhere for a path): a control
// block (versions, per-slot states, one lease word per reader lease), the tree's schema, then
// `slots` copies of the consolidated layout (or, for CUDA parameters, a device allocation that
// subscribers map through CUDA IPC). The first publish fixes the layout. A publish writes into a
// slot no reader holds and then makes it the newest version; a reader pins the slot it reads with
// a lease word that names its process, so the slot is never overwritten under it, and a reader
// that dies holding one is found dead (its pid gone, or reused by a later process) and its lease
// reclaimed. When live readers hold every slot but the newest, publish waits for one to be
// released, at most `timeout` (Timeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tensortree/device.hpp"
#include "tensortree/export.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

struct WeightPublisherOptions {
  // Copies of the layout kept: the newest version, the one being written, and at least one that
  // a slow reader may still hold. At least 3, at most 16.
  std::uint32_t slots = 3;
  // Lease words in the control block: how many versions readers on this node may hold at once.
  std::uint32_t max_leases = 256;
  // Where the slots live: the CPU (shared host memory) or a CUDA device (CUDA IPC). Default: the
  // device of the first tree published.
  std::optional<Device> device = {};
  // Threads that gather the leaves into a host slot; 0: chosen from the size, as consolidate() does.
  int threads = 0;
  // How long publish() waits for a slot while live readers hold all the others.
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  // An existing publication of this name is removed and replaced at the first publish; otherwise
  // it is reopened (a restarted learner continues its versions; its layout stays fixed).
  bool replace = false;
  // The name is removed from the file system when the publisher goes; readers that have it open
  // keep reading the last version.
  bool unlink_on_close = true;
};

struct WeightSubscriberOptions {
  // How long the constructor waits for the publication to appear (its first publish), and how long
  // latest() waits for a free lease word while live readers hold all of them.
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

class WeightSubscriber;

// One version held by a reader: its number and a tree whose leaves view the shared slot (read-only
// memory: writing a leaf faults). While the lease lives the publisher does not write that slot.
// Move-only; the destructor releases the slot. For CUDA parameters, finish the device work that
// reads the leaves before releasing.
class TT_API WeightLease {
 public:
  WeightLease() = default;
  WeightLease(WeightLease&& other) noexcept;
  WeightLease& operator=(WeightLease&& other) noexcept;
  WeightLease(const WeightLease&) = delete;
  WeightLease& operator=(const WeightLease&) = delete;
  ~WeightLease();

  bool held() const { return entry_ != nullptr; }
  std::uint64_t version() const { return version_; }
  // The parameters; valid while the lease is held.
  const TensorTree& tree() const;
  // The slot still holds this version (the seqlock, a second guard behind the lease): false only
  // if the control block was tampered with.
  bool intact() const;
  void release() noexcept;

 private:
  friend class WeightSubscriber;
  WeightLease(std::shared_ptr<const TensorTree> tree, void* entry, const void* slot_state, std::uint64_t version)
      : tree_(std::move(tree)), entry_(entry), slot_state_(slot_state), version_(version) {}

  // Shares ownership of the subscriber's mapping, so the views stay valid after the subscriber goes.
  std::shared_ptr<const TensorTree> tree_;
  void* entry_ = nullptr;             // the lease word in the control block
  const void* slot_state_ = nullptr;  // the slot's state word (its seqlock)
  std::uint64_t version_ = 0;
};

// The learner's side. One publisher per name at a time (a second one while the first lives is
// InvalidArgument); publish from one thread at a time. Move-only; a moved-from publisher may only
// be destroyed or assigned to.
class TT_API WeightPublisher {
 public:
  // `name`: a plain name lives at shared_memory_path(name); a name with a '/' is a file path (a
  // directory on any file system that supports shared mappings). Nothing is created until the
  // first publish.
  explicit WeightPublisher(std::string name, WeightPublisherOptions options = {});
  // Where a publication of plain name `name` lives: /dev/shm/tensortree-weights-<name> (the rule
  // of ReplayBuffer::shared_memory_path). InvalidArgument for a name that is not one plain file name.
  static std::filesystem::path shared_memory_path(std::string_view name);
  WeightPublisher(WeightPublisher&&) noexcept;
  WeightPublisher& operator=(WeightPublisher&&) noexcept;
  ~WeightPublisher();

  // Copies `params` (gathered leaf by leaf straight into a free slot) and makes it the newest
  // version: the previous version + 1, or `version` when given (it must be larger). SchemaMismatch
  // when the layout differs from the publication's, naming the first difference; Timeout when live
  // readers hold every slot for longer than options.timeout.
  std::uint64_t publish(const TensorTree& params);
  std::uint64_t publish(const TensorTree& params, std::uint64_t version);

  // The newest version published (0 before the first).
  std::uint64_t version() const;
  const std::string& path() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// An actor's side: opens the publication by name. Cheap to keep; move-only (a moved-from one may
// only be destroyed or assigned to). Leases may be taken from several threads at once.
class TT_API WeightSubscriber {
 public:
  // Waits at most options.timeout for the publication to exist (Timeout), then validates its
  // control block: CorruptData naming the field when it is truncated, of another format version,
  // or inconsistent.
  explicit WeightSubscriber(std::string name, WeightSubscriberOptions options = {});
  WeightSubscriber(WeightSubscriber&&) noexcept;
  WeightSubscriber& operator=(WeightSubscriber&&) noexcept;
  ~WeightSubscriber();

  // The newest complete version, zero-copy.
  WeightLease latest() const;
  // The newest version number, without taking a lease (0 before the first publish).
  std::uint64_t latest_version() const;
  // The newest version copied into `params`' own leaves (any strides, any device; its layout must
  // match: SchemaMismatch); returns its version number.
  std::uint64_t copy_into(const TensorTree& params) const;
  // The newest version in a fresh consolidated tree of this process's memory.
  std::pair<std::uint64_t, TensorTree> latest_copy() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

class Group;

// Across nodes: sends the root's parameters and version to every rank of `group` in one tree
// broadcast (the version rides in the tree). On the root `params` is read and `version` returned;
// elsewhere `params` is empty (it becomes a new tree) or has the root's layout (received into its
// leaves; SchemaMismatch otherwise), and the root's version is returned. One rank per node then
// publishes it to that node's WeightPublisher.
TT_API std::uint64_t broadcast_weights(const Group& group, int root, TensorTree& params, std::uint64_t version);

}  // namespace tensortree
