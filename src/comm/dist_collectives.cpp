// The fixed-shape collectives of dist_ops, each written once over the Collectives interface: check the
// arguments (agreed across the group in debug mode), pack what is not contiguous, allocate the
// outputs (one buffer per operation, viewed per rank), post, and copy in-place results back into
// the caller's view when the Work finishes.
#include "tensortree/dist_ops.hpp"

#include <array>
#include <string>
#include <utility>

#include "comm/collective_check.hpp"
#include "comm/dist_internal.hpp"
#include "comm/peer_claims.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::dist {

using namespace detail;

namespace {

void check_reduce_op(ReduceOp op, DType dtype, std::string_view operation) {
  const std::string prefix = fmt::format("{}: op {}", operation, reduce_op_name(op));
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Product:
    case ReduceOp::Avg:
      return;
    case ReduceOp::Min:
    case ReduceOp::Max:
      if (is_complex(dtype)) {
        throw InvalidArgument(fmt::format("{} has no order on a {} dtype", prefix, dtype));
      }
      return;
    case ReduceOp::BitwiseAnd:
    case ReduceOp::BitwiseOr:
    case ReduceOp::BitwiseXor:
      if (!is_integral(dtype) && dtype != DType::Bool) {
        throw InvalidArgument(fmt::format("{} needs an integer or bool dtype, not {}", prefix, dtype));
      }
      return;
  }
  throw InvalidArgument(fmt::format("{}: op {} is not a ReduceOp", operation, static_cast<int>(op)));
}

// The common prologue of the collectives on one tensor: membership, then the tensor and the checks
// in `more`, agreed across the group in debug mode (collective_check.hpp).
template <class MoreChecks>
void check_tensor_collective(const Tensor& tensor, const Group& group, const CollectiveCall& call, MoreChecks&& more) {
  check_member(group, call.op);
  check_collective(call, group, [&] {
    check_defined(tensor, "tensor", call.op);
    more();
  });
}
void check_tensor_collective(const Tensor& tensor, const Group& group, const CollectiveCall& call) {
  check_tensor_collective(tensor, group, call, [] {});
}

// ---- scatter's small round ---------------------------------------------------------------------

// The root tells every rank, before any data moves, whether its inputs are valid and if so the
// shape, dtype and device kind of one block: a root's bad argument then fails every rank together.
TensorHeader announce_scatter(std::span<const Tensor> inputs, int root, const Group& group) {
  constexpr std::string_view op = "scatter";
  std::string problem;
  std::array<std::int64_t, 1 + kHeaderWords> words{};
  if (group.rank() == root) {
    problem = per_rank_list_problem(inputs, "inputs", group);
    if (problem.empty() && inputs[0].dim() > static_cast<std::int64_t>(kMaxHeaderDims)) {
      problem = fmt::format("inputs[0] has {} dimensions; at most {} are supported", inputs[0].dim(), kMaxHeaderDims);
    }
    if (problem.empty()) {
      words[0] = 1;
      const HeaderWords header = encode_header(TensorHeader::of(inputs[0]), op);
      std::copy(header.begin(), header.end(), words.begin() + 1);
    }
  }
  const std::vector<std::int64_t> received = announce_words(words, root, group);
  if (!problem.empty()) throw InvalidArgument(fmt::format("{}: {}", op, problem));
  if (received[0] != 1) {
    throw InvalidArgument(fmt::format("{}: the root (rank {}) passed invalid inputs and reported why there; nothing "
                                      "was scattered", op, root));
  }
  return decode_header(std::span(received).subspan(1), root);
}

}  // namespace

// ---- broadcast and reductions -------------------------------------------------------------------------

WorkPtr broadcast_async(const Tensor& tensor, int root, const Group& group) {
  constexpr std::string_view op = "broadcast";
  check_tensor_collective(tensor, group, {.op = op, .root = root, .tensor = &tensor},
                          [&] { check_rank(root, "src", group, op); });
  const Tensor packed = tensor.contiguous();
  WorkPtr work = group.collectives(tensor.device()).broadcast(packed, root);
  if (group.rank() == root) return work;
  return then_copy_back(std::move(work), tensor, packed);
}

void broadcast(const Tensor& tensor, int root, const Group& group) { broadcast_async(tensor, root, group)->wait(); }

WorkPtr all_reduce_async(const Tensor& tensor, const Group& group, ReduceOp op) {
  constexpr std::string_view name = "all_reduce";
  check_tensor_collective(tensor, group, {.op = name, .reduction = op, .tensor = &tensor},
                          [&] { check_reduce_op(op, tensor.dtype(), name); });
  const Tensor packed = tensor.contiguous();
  return then_copy_back(group.collectives(tensor.device()).all_reduce(packed, op), tensor, packed);
}

void all_reduce(const Tensor& tensor, const Group& group, ReduceOp op) { all_reduce_async(tensor, group, op)->wait(); }

WorkPtr reduce_async(const Tensor& tensor, int root, const Group& group, ReduceOp op) {
  constexpr std::string_view name = "reduce";
  check_tensor_collective(tensor, group, {.op = name, .root = root, .reduction = op, .tensor = &tensor}, [&] {
    check_rank(root, "dst", group, name);
    check_reduce_op(op, tensor.dtype(), name);
  });
  const Tensor packed = tensor.contiguous();
  WorkPtr work = group.collectives(tensor.device()).reduce(packed, root, op);
  if (group.rank() != root) return work;
  return then_copy_back(std::move(work), tensor, packed);
}

void reduce(const Tensor& tensor, int root, const Group& group, ReduceOp op) {
  reduce_async(tensor, root, group, op)->wait();
}

// ---- gathers ---------------------------------------------------------------------------------------

Pending<std::vector<Tensor>> all_gather_async(const Tensor& tensor, const Group& group) {
  check_tensor_collective(tensor, group, {.op = "all_gather", .tensor = &tensor});
  const Tensor output = empty_like_shape(with_leading(group.size(), tensor.shape()), tensor);
  WorkPtr work = group.collectives(tensor.device()).all_gather(output, tensor.contiguous());
  return {std::move(work), blocks_of(output)};
}

std::vector<Tensor> all_gather(const Tensor& tensor, const Group& group) {
  auto pending = all_gather_async(tensor, group);
  return std::move(pending.get());
}

Pending<Tensor> all_gather_into_tensor_async(const Tensor& tensor, const Group& group) {
  constexpr std::string_view op = "all_gather_into_tensor";
  check_tensor_collective(tensor, group, {.op = op, .tensor = &tensor}, [&] {
    if (tensor.dim() == 0) invalid(op, "tensor is zero-dimensional and has no dimension 0 to concatenate along");
  });
  Shape shape = tensor.shape();
  shape[0] = rows_times(shape[0], group.size(), op);
  const Tensor output = empty_like_shape(std::move(shape), tensor);
  WorkPtr work = group.collectives(tensor.device()).all_gather(output, tensor.contiguous());
  return {std::move(work), output};
}

Tensor all_gather_into_tensor(const Tensor& tensor, const Group& group) {
  return all_gather_into_tensor_async(tensor, group).get();
}

Pending<std::vector<Tensor>> gather_async(const Tensor& tensor, int root, const Group& group) {
  constexpr std::string_view op = "gather";
  check_tensor_collective(tensor, group, {.op = op, .root = root, .tensor = &tensor},
                          [&] { check_rank(root, "dst", group, op); });
  const bool is_root = group.rank() == root;
  const Tensor output = is_root ? empty_like_shape(with_leading(group.size(), tensor.shape()), tensor) : Tensor{};
  WorkPtr work = group.collectives(tensor.device()).gather(output, tensor.contiguous(), root);
  return {std::move(work), is_root ? blocks_of(output) : std::vector<Tensor>{}};
}

std::vector<Tensor> gather(const Tensor& tensor, int root, const Group& group) {
  auto pending = gather_async(tensor, root, group);
  return std::move(pending.get());
}

// ---- scatter and reduce_scatter -----------------------------------------------------------------------

Pending<Tensor> scatter_async(std::span<const Tensor> inputs, int root, const Group& group) {
  check_member(group, "scatter");
  // The root's inputs are checked in the announcement round that follows, which every rank joins.
  check_collective({.op = "scatter", .root = root}, group, [&] { check_rank(root, "src", group, "scatter"); });
  const TensorHeader block = announce_scatter(inputs, root, group);
  const bool is_root = group.rank() == root;
  const Device device = is_root ? inputs[0].device() : device_of_kind(block.device_type);
  if (!is_root) tensortree::detail::check_peer_claim(group, root, block.nbytes(), "scatter: the root's announced block");
  const Tensor output = Tensor::empty(block.shape, {block.dtype, device});
  const Tensor stacked = is_root ? Tensor::stack(inputs) : Tensor{};
  // The output's device, not `device`: allocation resolved "the current CUDA device" to an index.
  return {group.collectives(output.device()).scatter(output, stacked, root), output};
}

Tensor scatter(std::span<const Tensor> inputs, int root, const Group& group) {
  return scatter_async(inputs, root, group).get();
}

Pending<Tensor> reduce_scatter_async(std::span<const Tensor> inputs, const Group& group, ReduceOp op) {
  constexpr std::string_view name = "reduce_scatter";
  check_member(group, name);
  check_collective({.op = name, .reduction = op, .tensor = first_of(inputs)}, group, [&] {
    check_per_rank_list(inputs, "inputs", group, name);
    check_reduce_op(op, inputs[0].dtype(), name);
  });
  const Tensor output = empty_like_shape(inputs[0].shape(), inputs[0]);
  WorkPtr work = group.collectives(output.device()).reduce_scatter(output, Tensor::stack(inputs), op);
  return {std::move(work), output};
}

Tensor reduce_scatter(std::span<const Tensor> inputs, const Group& group, ReduceOp op) {
  return reduce_scatter_async(inputs, group, op).get();
}

Pending<Tensor> reduce_scatter_tensor_async(const Tensor& input, const Group& group, ReduceOp op) {
  constexpr std::string_view name = "reduce_scatter_tensor";
  check_member(group, name);
  check_collective({.op = name, .reduction = op, .tensor = &input}, group, [&] {
    check_defined(input, "input", name);
    check_reduce_op(op, input.dtype(), name);
    if (input.dim() == 0 || input.size(0) % group.size() != 0) {
      invalid(name, fmt::format("input of shape {} does not split into {} equal blocks along dimension 0",
                                shape_str(input.shape()), group.size()));
    }
  });
  Shape shape = input.shape();
  shape[0] /= group.size();
  const Tensor output = empty_like_shape(std::move(shape), input);
  WorkPtr work = group.collectives(input.device()).reduce_scatter(output, input.contiguous(), op);
  return {std::move(work), output};
}

Tensor reduce_scatter_tensor(const Tensor& input, const Group& group, ReduceOp op) {
  return reduce_scatter_tensor_async(input, group, op).get();
}

// ---- barrier -----------------------------------------------------------------------------------------

WorkPtr barrier_async(const Group& group) {
  check_member(group, "barrier");
  check_collective({.op = "barrier"}, group, [] {});
  return metadata_collectives(group).barrier();
}

void barrier(const Group& group) { barrier_async(group)->wait(); }

}  // namespace tensortree::dist
