#include "comm/group_collectives.hpp"

#include <algorithm>
#include <utility>

namespace tensortree::detail {

GroupCollectives::GroupCollectives(std::shared_ptr<Collectives> engine,
                                   const std::vector<std::shared_ptr<PeerTransport>>& peers,
                                   OperationCounters& counters)
    : engine_(std::move(engine)), counters_(counters) {
  for (const auto& peer : peers) {
    if (std::find(polled_.begin(), polled_.end(), peer) == polled_.end()) polled_.push_back(peer);
  }
}

WorkPtr GroupCollectives::progressing(WorkPtr work, const char* operation, const PeerTransport* posted_on) const {
  for (const auto& peer : polled_) {
    if (peer.get() != posted_on) work = peer->progressing(std::move(work), operation);
  }
  std::atomic<std::uint64_t>& counter = posted_on != nullptr ? counters_.point_to_point : counters_.collectives;
  work->describe(operation, counter.fetch_add(1, std::memory_order_relaxed) + 1);
  return work;
}

WorkPtr GroupCollectives::broadcast(const Tensor& tensor, int root) {
  return progressing(engine_->broadcast(tensor, root), "broadcast");
}

WorkPtr GroupCollectives::all_reduce(const Tensor& tensor, ReduceOp op) {
  return progressing(engine_->all_reduce(tensor, op), "all_reduce");
}

WorkPtr GroupCollectives::reduce(const Tensor& tensor, int root, ReduceOp op) {
  return progressing(engine_->reduce(tensor, root, op), "reduce");
}

WorkPtr GroupCollectives::all_gather(const Tensor& output, const Tensor& input) {
  return progressing(engine_->all_gather(output, input), "all_gather");
}

WorkPtr GroupCollectives::gather(const Tensor& output, const Tensor& input, int root) {
  return progressing(engine_->gather(output, input, root), "gather");
}

WorkPtr GroupCollectives::scatter(const Tensor& output, const Tensor& input, int root) {
  return progressing(engine_->scatter(output, input, root), "scatter");
}

WorkPtr GroupCollectives::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  return progressing(engine_->reduce_scatter(output, input, op), "reduce_scatter");
}

WorkPtr GroupCollectives::all_to_all(const Tensor& output, const Tensor& input,
                                     std::span<const std::int64_t> output_counts,
                                     std::span<const std::int64_t> input_counts) {
  return progressing(engine_->all_to_all(output, input, output_counts, input_counts), "all_to_all");
}

WorkPtr GroupCollectives::barrier() { return progressing(engine_->barrier(), "barrier"); }

}  // namespace tensortree::detail
