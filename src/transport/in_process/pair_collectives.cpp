#include "transport/in_process/pair_collectives.hpp"

#include <memory>
#include <utility>
#include <vector>

#include "comm/combine.hpp"
#include "comm/reduction_rules.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

using Kind = P2POp::Kind;

// Elements [offset, offset + count) of a contiguous tensor, as a 1-D view.
Tensor block(const Tensor& contiguous, std::int64_t offset, std::int64_t count) {
  return Tensor(contiguous.storage(), contiguous.byte_offset() + static_cast<std::size_t>(offset) * itemsize(contiguous.dtype()),
                contiguous.dtype(), {count}, {1});
}

Tensor flat(const Tensor& contiguous) { return block(contiguous, 0, contiguous.numel()); }

Tensor like(const Tensor& contiguous) { return Tensor::empty({contiguous.numel()}, {contiguous.dtype()}); }

// values[0] (op) values[1] (op) ... in rank order, into `result`; AVG divided by their number.
void reduce_in_rank_order(const std::vector<Tensor>& values, ReduceOp op, const Tensor& result) {
  Tensor accumulated = flat(values.front()).clone();
  for (std::size_t r = 1; r < values.size(); ++r) combine_into(accumulated, flat(values[r]), op);
  if (op == ReduceOp::Avg) divide_in_place(accumulated, static_cast<int>(values.size()));
  flat(result).copy_(accumulated);
}

// NotSupported before anything is sent, alike on every rank.
void check_reducible(DType dtype, ReduceOp op) {
  if (const std::string refusal = reduction_refusal(dtype, op); !refusal.empty()) {
    throw NotSupported(fmt::format("the collectives over pairs cannot reduce {} tensors with {}: {}", dtype,
                                   reduce_op_name(op), refusal));
  }
}

// The offset of each of `counts`' consecutive blocks.
std::vector<std::int64_t> offsets_of(std::span<const std::int64_t> counts) {
  std::vector<std::int64_t> offsets;
  std::int64_t next = 0;
  for (const std::int64_t count : counts) {
    offsets.push_back(next);
    next += count;
  }
  return offsets;
}

// gather (the root receives) and scatter (the root sends): the root moves block r of `blocks` with
// each rank r and copies its own block itself; every other rank moves `own` with the root.
WorkPtr rooted(PairLink& link, Kind at_root, const Tensor& blocks, const Tensor& own, int root, const char* operation) {
  const int tag = link.next_collective();
  std::vector<P2POp> ops;
  if (link.rank() != root) {
    ops.push_back({at_root == Kind::Recv ? Kind::Send : Kind::Recv, own, root, tag});
    return link.post(ops, operation);
  }
  const std::int64_t n = own.numel();
  for (int r = 0; r < link.size(); ++r) {
    if (r != root) ops.push_back({at_root, block(blocks, r * n, n), r, tag});
  }
  const Tensor mine = block(blocks, root * n, n);
  if (at_root == Kind::Recv) {
    mine.copy_(flat(own));
  } else {
    flat(own).copy_(mine);
  }
  return link.post(ops, operation);
}

}  // namespace

WorkPtr PairCollectives::broadcast_tagged(PairLink& link, const Tensor& tensor, int root, int tag,
                                          const char* operation) {
  std::vector<P2POp> ops;
  if (link.rank() != root) {
    ops.push_back({Kind::Recv, tensor, root, tag});
  } else {
    for (int r = 0; r < link.size(); ++r) {
      if (r != root) ops.push_back({Kind::Send, tensor, r, tag});
    }
  }
  return link.post(ops, operation);
}

WorkPtr PairCollectives::reduce_tagged(PairLink& link, const Tensor& tensor, int root, ReduceOp op, int tag,
                                       const char* operation) {
  if (link.rank() != root) {
    const P2POp send{Kind::Send, tensor, root, tag};
    return link.post({&send, 1}, operation);
  }
  std::vector<Tensor> values;
  std::vector<P2POp> ops;
  for (int r = 0; r < link.size(); ++r) {
    values.push_back(r == root ? tensor : like(tensor));
    if (r != root) ops.push_back({Kind::Recv, values.back(), r, tag});
  }
  return Work::then(link.post(ops, operation), [values, op, tensor] { reduce_in_rank_order(values, op, tensor); });
}

WorkPtr PairCollectives::broadcast(const Tensor& tensor, int root) {
  return broadcast_tagged(*link_, tensor, root, link_->next_collective(), "broadcast");
}

WorkPtr PairCollectives::reduce(const Tensor& tensor, int root, ReduceOp op) {
  check_reducible(tensor.dtype(), op);
  return reduce_tagged(*link_, tensor, root, op, link_->next_collective(), "reduce");
}

// Both steps' tag is taken now: the broadcast is posted only once the reduction is in, and a later
// collective must not take its number meanwhile.
WorkPtr PairCollectives::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_reducible(tensor.dtype(), op);
  const int tag = link_->next_collective();
  WorkPtr reduced = reduce_tagged(*link_, tensor, 0, op, tag, "all_reduce");
  return Work::chain(std::move(reduced),
                     [link = link_, tensor, tag] { return broadcast_tagged(*link, tensor, 0, tag, "all_reduce"); });
}

WorkPtr PairCollectives::all_gather(const Tensor& output, const Tensor& input) {
  const int tag = link_->next_collective();
  const std::int64_t n = input.numel();
  std::vector<P2POp> ops;
  for (int r = 0; r < link_->size(); ++r) {
    if (r == link_->rank()) continue;
    ops.push_back({Kind::Send, input, r, tag});
    ops.push_back({Kind::Recv, block(output, r * n, n), r, tag});
  }
  block(output, link_->rank() * n, n).copy_(flat(input));
  return link_->post(ops, "all_gather");
}

WorkPtr PairCollectives::gather(const Tensor& output, const Tensor& input, int root) {
  return rooted(*link_, Kind::Recv, output, input, root, "gather");
}

WorkPtr PairCollectives::scatter(const Tensor& output, const Tensor& input, int root) {
  return rooted(*link_, Kind::Send, input, output, root, "scatter");
}

WorkPtr PairCollectives::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_reducible(output.dtype(), op);
  const int tag = link_->next_collective();
  const std::int64_t n = output.numel();
  std::vector<Tensor> values;
  std::vector<P2POp> ops;
  for (int r = 0; r < link_->size(); ++r) {
    if (r == link_->rank()) {
      values.push_back(block(input, r * n, n));
      continue;
    }
    values.push_back(like(output));
    ops.push_back({Kind::Send, block(input, r * n, n), r, tag});
    ops.push_back({Kind::Recv, values.back(), r, tag});
  }
  return Work::then(link_->post(ops, "reduce_scatter"), [values, op, output] { reduce_in_rank_order(values, op, output); });
}

WorkPtr PairCollectives::all_to_all(const Tensor& output, const Tensor& input,
                                    std::span<const std::int64_t> output_counts,
                                    std::span<const std::int64_t> input_counts) {
  const int tag = link_->next_collective();
  const std::vector<std::int64_t> in_offsets = offsets_of(input_counts);
  const std::vector<std::int64_t> out_offsets = offsets_of(output_counts);
  std::vector<P2POp> ops;
  for (int r = 0; r < link_->size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    const Tensor sent = block(input, in_offsets[i], input_counts[i]);
    const Tensor received = block(output, out_offsets[i], output_counts[i]);
    if (r == link_->rank()) {
      received.copy_(sent);
      continue;
    }
    ops.push_back({Kind::Send, sent, r, tag});
    ops.push_back({Kind::Recv, received, r, tag});
  }
  return link_->post(ops, "all_to_all");
}

// Everyone tells everyone it arrived: n^2 empty messages, plain for the few ranks of one process.
WorkPtr PairCollectives::barrier() {
  const int tag = link_->next_collective();
  const Tensor token = Tensor::empty({0}, {DType::UInt8});
  std::vector<P2POp> ops;
  for (int r = 0; r < link_->size(); ++r) {
    if (r == link_->rank()) continue;
    ops.push_back({Kind::Send, token, r, tag});
    ops.push_back({Kind::Recv, Tensor::empty({0}, {DType::UInt8}), r, tag});
  }
  return link_->post(ops, "barrier");
}

}  // namespace tensortree::detail
