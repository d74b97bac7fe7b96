// PairCollectives: every collective of Collectives written once over point-to-point messages (linear
// algorithms: correct and plain rather than fast), for a transport that has only pairs. Each
// collective is one batch of sends and receives on the transport's collective channel, tagged with
// the collective's sequence number so that its messages cannot meet another collective's, followed
// by a local step (copying the own block, reducing). Reductions combine the ranks' values in rank
// order, so every rank's result is bitwise the same; all_reduce is reduce to rank 0, then its
// broadcast. Nothing here knows the in-process transport: any PairLink serves.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "tensortree/collectives.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

// What the collectives need of a point-to-point transport.
class PairLink {
 public:
  virtual ~PairLink() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The tag of this member's next collective: every member numbers its collectives alike.
  virtual int next_collective() = 0;
  // Posts `ops` (contiguous host tensors) on the collectives' own channel, in order; completes when
  // all have. `operation` names the collective in a Timeout.
  virtual WorkPtr post(std::span<const P2POp> ops, const char* operation) = 0;
};

class PairCollectives {
 public:
  // The link may be shared with the Works in flight, which may outlive this object.
  explicit PairCollectives(std::shared_ptr<PairLink> link) : link_(std::move(link)) {}

  WorkPtr broadcast(const Tensor& tensor, int root);
  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op);
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op);
  WorkPtr all_gather(const Tensor& output, const Tensor& input);
  WorkPtr gather(const Tensor& output, const Tensor& input, int root);
  WorkPtr scatter(const Tensor& output, const Tensor& input, int root);
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op);
  WorkPtr all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                     std::span<const std::int64_t> input_counts);
  WorkPtr barrier();

 private:
  static WorkPtr broadcast_tagged(PairLink& link, const Tensor& tensor, int root, int tag, const char* operation);
  // Every rank's values combined into `root`'s tensor (AVG divided there).
  static WorkPtr reduce_tagged(PairLink& link, const Tensor& tensor, int root, ReduceOp op, int tag,
                               const char* operation);

  std::shared_ptr<PairLink> link_;
};

}  // namespace tensortree::detail
