// GroupCollectives: the collectives a group's members call on one device. Each operation runs on
// the engine's Collectives; its Work then goes through every peer transport's progress hook
// (PeerTransport::progressing), so that while a collective waits this rank still takes what its
// peers send to the receives it had posted: over shared memory a frame moves only inside this
// rank's polls, and a peer may wait on its send to this rank before it joins the collective.
// The group's point to point takes the same hooks (GroupState::progressing): a Work posted on
// one peer transport goes through the others', as a rank waiting on MPI for a peer on another
// node must still take the shared-memory frames of a peer on its own. The one place where the
// group's transports meet.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensortree/collectives.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

// The numbers a group gives the operations it posts (Work::sequence), collectives and point to
// point apart: every member counts the same collectives, but only two count a send.
struct OperationCounters {
  std::atomic<std::uint64_t> collectives{0};
  std::atomic<std::uint64_t> point_to_point{0};
};

class GroupCollectives final : public Collectives {
 public:
  // `peers` may repeat a transport, and may hold the engine's own peer half (its hook does nothing).
  // `counters` are the group's, and outlive this.
  GroupCollectives(std::shared_ptr<Collectives> engine, const std::vector<std::shared_ptr<PeerTransport>>& peers,
                   OperationCounters& counters);

  // The engine's: what runs the collectives.
  std::string_view name() const override { return engine_->name(); }
  TransportCapabilities capabilities() const override { return engine_->capabilities(); }
  int rank() const override { return engine_->rank(); }
  int size() const override { return engine_->size(); }

  WorkPtr broadcast(const Tensor& tensor, int root) override;
  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op) override;
  WorkPtr all_gather(const Tensor& output, const Tensor& input) override;
  WorkPtr gather(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr scatter(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                     std::span<const std::int64_t> input_counts) override;
  WorkPtr barrier() override;
  void abort(const std::string& reason) override { engine_->abort(reason); }

  // `work` through the progress hook of each distinct peer transport but `posted_on` (the one
  // that runs it, which progresses itself; null for a collective), described as `operation` with
  // the group's next number for its kind (Work::describe).
  WorkPtr progressing(WorkPtr work, const char* operation, const PeerTransport* posted_on = nullptr) const;

 private:
  std::shared_ptr<Collectives> engine_;
  std::vector<std::shared_ptr<PeerTransport>> polled_;
  OperationCounters& counters_;
};

}  // namespace tensortree::detail
