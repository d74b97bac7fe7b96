// GroupState: what the copies of one Group share, for any transport. A member's state owns the
// bootstrap, the transport table (on each device, the collectives and the transport of each peer,
// filled on first use by a factory of the transports this build has), the group's options, and
// attachments: state that layers above keep per group (layout registries, spare buffers), created
// on first use and dropped with the group. A non-member knows only who the members are.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "comm/abort_signal.hpp"
#include "comm/group_abort_domain.hpp"
#include "comm/bootstrap.hpp"
#include "comm/group_collectives.hpp"
#include "comm/transport_choice.hpp"
#include "tensortree/collectives.hpp"
#include "tensortree/device.hpp"
#include "tensortree/group.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

class GroupState;

// What serves one device for one group.
struct DeviceTransports {
  // The group-wide collectives (once in the group's table, behind GroupCollectives).
  std::shared_ptr<Collectives> collectives;
  // Point-to-point traffic with each peer, by group rank (the own rank's entry included).
  std::vector<std::shared_ptr<PeerTransport>> peers;
  // Takes a receive from kAnySource. Where one engine serves every peer, it sees every member's
  // messages. Otherwise no transport does by itself: the shared-memory transport matches them all
  // only because they travel on one communicator (its frames and the plain MPI messages of peers
  // off the node both go on the group's MPI communicator, or in-process mailboxes) and it tells
  // them apart as they arrive. Where that does not hold (CUDA IPC next to staged chunks; NCCL,
  // which has no such receive) its recv says NotSupported. The group also allocates the buffers it
  // sends trees from here (allocate_message_buffer): in shared memory where there is one.
  std::shared_ptr<PeerTransport> any_source;
};

// Chooses and creates a group's transports. One factory serves every group of a context.
class TransportFactory {
 public:
  virtual ~TransportFactory() = default;
  // The transports for `device` (already resolved: cpu or cuda:n). Called once per group and
  // device, the first time the group moves a tensor there; collective over the group's members
  // where creating a transport is (NCCL's communicator).
  virtual DeviceTransports create(GroupState& group, Device device) = 0;
};

class GroupState : public std::enable_shared_from_this<GroupState> {
 public:
  // A member's state. Collective over the members: they share where each runs (placements()).
  GroupState(std::unique_ptr<Bootstrap> bootstrap, std::shared_ptr<TransportFactory> factory,
             std::vector<int> world_ranks, GroupOptions options);
  // A non-member's state.
  GroupState(std::vector<int> world_ranks, GroupOptions options);
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;
  ~GroupState();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(world_ranks_.size()); }
  bool is_member() const { return rank_ >= 0; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // The options as the group's maker passed them (unset fields follow the environment), and as
  // resolved when the group was made (GroupOptions::resolve, which throws before anything else).
  const GroupOptions& requested_options() const { return requested_; }
  const ResolvedGroupOptions& options() const { return options_; }
  // Where each member runs, by group rank (empty for a non-member).
  const std::vector<RankPlacement>& placements() const { return placements_; }
  // By group rank: 1 where this member and that one can map each other's shared memory (members of
  // one node whose probes mapped both ways), 0 elsewhere (empty for a non-member).
  const std::vector<std::uint8_t>& mappable() const { return mappable_; }

  // InvalidArgument for a non-member.
  Bootstrap& bootstrap();
  Collectives& collectives(Device device);
  PeerTransport& transport(int peer, Device device);
  // The transport that takes receives from kAnySource (DeviceTransports::any_source).
  PeerTransport& any_source(Device device);
  // `work`, posted on `posted_on` (one of this group's transports on `device`), through the
  // progress hooks of the group's other peer transports (GroupCollectives::progressing).
  WorkPtr progressing(Device device, const PeerTransport& posted_on, WorkPtr work, const char* operation);

  // The numbers of the operations posted so far (Work::sequence).
  const OperationCounters& operation_counters() const { return counters_; }

  // Group::abort: tells every transport made so far, then refuses every later use. Never blocks.
  void abort(const std::string& reason);
  bool is_aborted() const { return aborted_.raised(); }
  // Makes this member's state one of `domain`'s: aborted with it (at once where it was already),
  // and so is every group split from this one later. Called by the group's maker, before the group
  // is shared (runtime/in_process_world.cpp joins each thread's world group).
  void abort_with(std::shared_ptr<GroupAbortDomain> domain);

  // Collective over the members: the members passing the same non-negative `color` form a new
  // group, ranked by `key`; `world_ranks` are its members' in that order. A member passing a
  // negative color gets a non-member's state of `world_ranks`. A new member's state joins this
  // group's abort domain, if it has one.
  std::shared_ptr<GroupState> split(int color, int key, std::vector<int> world_ranks, GroupOptions options);

  // This group's T, default-constructed on first use; the same object for every copy of the
  // group, distinct between groups. Looked up, not allocated, after the first call.
  template <class T>
  T& attachment() {
    const std::lock_guard lock(attachments_mutex_);
    std::shared_ptr<void>& slot = attachments_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }

 private:
  // InvalidArgument for a non-member; BackendError once aborted.
  void require_member() const;
  const DeviceTransports& transports(Device device);

  // Declared first, destroyed last: transports and attachments may use the bootstrap's channels.
  std::unique_ptr<Bootstrap> bootstrap_;
  std::shared_ptr<TransportFactory> factory_;
  std::vector<int> world_ranks_;
  GroupOptions requested_;
  ResolvedGroupOptions options_;
  int rank_ = -1;
  std::vector<RankPlacement> placements_;
  std::vector<std::uint8_t> mappable_;
  // Before the transports, whose GroupCollectives count with it.
  OperationCounters counters_;
  // Recursive: a factory may build one transport over another of the same group (staging CUDA
  // tensors over the group's host transport).
  std::recursive_mutex transports_mutex_;
  std::map<std::pair<DeviceType, int>, DeviceTransports> transports_;
  AbortSignal aborted_;
  // Null unless the group's maker joined one (abort_with); handed on by split.
  std::shared_ptr<GroupAbortDomain> abort_domain_;
  std::mutex attachments_mutex_;
  std::map<std::type_index, std::shared_ptr<void>> attachments_;
};

// The library's own access to a Group's state; users see Group's public methods only.
class GroupAccess {
 public:
  static const std::shared_ptr<GroupState>& state(const Group& group) { return group.state_; }
  static Group make(std::shared_ptr<GroupState> state) { return Group(std::move(state)); }
  // InvalidArgument for an empty Group (one not made by a DistributedContext).
  static GroupState& require(const Group& group);
};

}  // namespace tensortree::detail
