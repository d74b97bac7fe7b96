// The fixed-shape operations of dist_ops, each written once over the Backend interface: check the
// arguments, pack what is not contiguous, allocate the outputs (one buffer per operation, viewed per
// rank), post, and copy in-place results back into the caller's view when the Work finishes.
#include "tensortree/dist_ops.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "comm/collective_check.hpp"
#include "comm/dist_internal.hpp"
#include "core/checked_math.hpp"
#include "tensortree/error.hpp"

namespace tensortree::dist {

namespace detail {

namespace {

std::string describe(const Tensor& tensor) {
  return std::string(dtype_name(tensor.dtype())) + shape_str(tensor.shape()) + " on " + tensor.device().str();
}

[[noreturn]] void invalid(std::string_view op, const std::string& message) {
  throw InvalidArgument(std::string(op) + ": " + message);
}

// The first reason `tensors` is not one tensor per rank of a single shape, dtype and device; empty
// when there is none. scatter sends it to its receivers instead of throwing at once.
std::string per_rank_list_problem(std::span<const Tensor> tensors, std::string_view name, const Group& group) {
  const std::string list(name);
  if (static_cast<int>(tensors.size()) != group.size()) {
    return list + " holds " + std::to_string(tensors.size()) + " tensors; the group has " +
           std::to_string(group.size()) + " ranks and needs one per rank";
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string item = list + "[" + std::to_string(i) + "]";
    if (!tensors[i].defined()) return item + " is undefined";
    const Tensor& first = tensors[0];
    if (tensors[i].dtype() != first.dtype() || tensors[i].shape() != first.shape() ||
        tensors[i].device() != first.device()) {
      return item + " is " + describe(tensors[i]) + " but " + list + "[0] is " + describe(first) +
             "; every rank's tensor needs one shape, dtype and device";
    }
  }
  return {};
}


}  // namespace

void check_member(const Group& group, std::string_view op) {
  if (group.size() == 0) invalid(op, "group is an empty Group (no communicator)");
  if (!group.is_member()) invalid(op, "this process is not a member of group");
}

void check_rank(int rank, std::string_view name, const Group& group, std::string_view op) {
  if (rank < 0 || rank >= group.size()) {
    invalid(op, std::string(name) + " " + std::to_string(rank) + " is outside the group of " +
                    std::to_string(group.size()) + " ranks");
  }
}

void check_defined(const Tensor& tensor, std::string_view name, std::string_view op) {
  if (!tensor.defined()) invalid(op, std::string(name) + " is undefined");
}

void check_tag(int tag, std::string_view name, std::string_view op) {
  if (tag < 0 || tag > kMaxUserTag) {
    invalid(op, std::string(name) + " " + std::to_string(tag) + " is outside 0.." + std::to_string(kMaxUserTag));
  }
}

void check_per_rank_list(std::span<const Tensor> tensors, std::string_view name, const Group& group,
                         std::string_view op) {
  const std::string problem = per_rank_list_problem(tensors, name, group);
  if (!problem.empty()) invalid(op, problem);
}

Backend& metadata_backend(const Group& group) { return group.backend(Device::cpu()); }

Tensor byte_view(const Tensor& contiguous) {
  return Tensor(contiguous.storage(), contiguous.byte_offset(), DType::UInt8,
                {static_cast<std::int64_t>(contiguous.nbytes())}, {1});
}

Tensor int64_tensor(std::span<const std::int64_t> values) {
  Tensor out = Tensor::empty({static_cast<std::int64_t>(values.size())}, {DType::Int64});
  if (!values.empty()) std::memcpy(out.data_ptr(), values.data(), values.size_bytes());
  return out;
}

std::vector<std::int64_t> int64_values(const Tensor& tensor) {
  const auto* first = tensor.data<std::int64_t>();
  return {first, first + tensor.numel()};
}

void ByteExchange::send(const Tensor& contiguous, int peer) {
  if (contiguous.nbytes() == 0) return;
  ops_.push_back({P2POp::Kind::Send, byte_view(contiguous), peer, kInternalTag});
}

void ByteExchange::recv(const Tensor& contiguous, int peer) {
  if (contiguous.nbytes() == 0) return;
  ops_.push_back({P2POp::Kind::Recv, byte_view(contiguous), peer, kInternalTag});
}

WorkPtr ByteExchange::post(Backend& backend) const {
  if (ops_.empty()) return Work::completed();
  return backend.batch_p2p(ops_);
}

WorkPtr then_copy_back(WorkPtr work, std::vector<CopyBack> copies) {
  if (copies.empty()) return work;
  // The lambda keeps the packed copies alive until the transfer that writes them has finished.
  return Work::then(std::move(work), [copies = std::move(copies)] {
    for (const CopyBack& copy : copies) copy.destination.copy_(copy.packed);
  });
}

WorkPtr then_copy_back(WorkPtr work, const Tensor& destination, const Tensor& packed) {
  if (packed.storage() == destination.storage()) return work;  // the caller's own memory was used
  return then_copy_back(std::move(work), std::vector<CopyBack>{{destination, packed}});
}

}  // namespace detail

namespace {

using namespace detail;

void check_reduce_op(ReduceOp op, DType dtype, std::string_view operation) {
  const std::string prefix = std::string(operation) + ": op " + std::string(reduce_op_name(op));
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Product:
    case ReduceOp::Avg:
      return;
    case ReduceOp::Min:
    case ReduceOp::Max:
      if (is_complex(dtype)) {
        throw InvalidArgument(prefix + " has no order on a " + std::string(dtype_name(dtype)) + " dtype");
      }
      return;
    case ReduceOp::BitwiseAnd:
    case ReduceOp::BitwiseOr:
    case ReduceOp::BitwiseXor:
      if (!is_integral(dtype) && dtype != DType::Bool) {
        throw InvalidArgument(prefix + " needs an integer or bool dtype, not " + std::string(dtype_name(dtype)));
      }
      return;
  }
  throw InvalidArgument(std::string(operation) + ": op " + std::to_string(static_cast<int>(op)) + " is not a ReduceOp");
}

// The common prologue of point-to-point operations on one tensor.
void check_tensor_op(const Tensor& tensor, const Group& group, std::string_view op) {
  check_member(group, op);
  check_defined(tensor, "tensor", op);
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

// The first tensor of a per-rank list, for the debug round; null when the list is empty.
const Tensor* first_of(std::span<const Tensor> tensors) { return tensors.empty() ? nullptr : &tensors[0]; }

Shape with_leading(std::int64_t leading, const Shape& shape) {
  Shape out{leading};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

Tensor empty_like_shape(Shape shape, const Tensor& like) {
  return Tensor::empty(std::move(shape), {like.dtype(), like.device()});
}

// Each rank's block of a [group size, ...] buffer.
std::vector<Tensor> blocks_of(const Tensor& stacked) {
  std::vector<Tensor> blocks;
  blocks.reserve(static_cast<std::size_t>(stacked.size(0)));
  for (std::int64_t r = 0; r < stacked.size(0); ++r) blocks.push_back(stacked.select(0, r));
  return blocks;
}

std::int64_t rows_times(std::int64_t rows, std::int64_t factor, std::string_view op) {
  const std::optional<std::int64_t> product = tensortree::detail::checked_mul(rows, factor);
  if (!product) {
    throw InvalidArgument(std::string(op) + ": " + std::to_string(rows) + " rows times " + std::to_string(factor) +
                          " overflows int64");
  }
  return *product;
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
      problem = "inputs[0] has " + std::to_string(inputs[0].dim()) + " dimensions; at most " +
                std::to_string(kMaxHeaderDims) + " are supported";
    }
    if (problem.empty()) {
      words[0] = 1;
      const HeaderWords header = encode_header(TensorHeader::of(inputs[0]), op);
      std::copy(header.begin(), header.end(), words.begin() + 1);
    }
  }
  const Tensor message = int64_tensor(words);
  metadata_backend(group).broadcast(message, root)->wait();
  if (!problem.empty()) throw InvalidArgument(std::string(op) + ": " + problem);
  const std::vector<std::int64_t> received = int64_values(message);
  if (received[0] != 1) {
    throw InvalidArgument(std::string(op) + ": the root (rank " + std::to_string(root) +
                          ") passed invalid inputs and reported why there; nothing was scattered");
  }
  return decode_header(std::span(received).subspan(1), root);
}

// ---- all_to_all_single's splits ------------------------------------------------------------------

std::vector<std::int64_t> checked_splits(const std::vector<std::int64_t>& splits, std::string_view name,
                                         const Group& group, std::string_view op) {
  const std::string prefix = std::string(op) + ": " + std::string(name);
  if (static_cast<int>(splits.size()) != group.size()) {
    throw InvalidArgument(prefix + " holds " + std::to_string(splits.size()) + " sizes; the group has " +
                          std::to_string(group.size()) + " ranks");
  }
  for (std::size_t r = 0; r < splits.size(); ++r) {
    if (splits[r] < 0) {
      throw InvalidArgument(prefix + "[" + std::to_string(r) + "] is negative (" + std::to_string(splits[r]) + ")");
    }
  }
  return splits;
}

std::vector<std::int64_t> input_splits_for(const Tensor& input, const AllToAllSplits& splits, const Group& group,
                                           std::string_view op) {
  const std::int64_t rows = input.size(0);
  if (splits.input_splits.empty()) {
    if (rows % group.size() != 0) {
      throw InvalidArgument(std::string(op) + ": input has " + std::to_string(rows) +
                            " rows, which do not split into " + std::to_string(group.size()) +
                            " equal blocks; pass input_splits");
    }
    return std::vector<std::int64_t>(static_cast<std::size_t>(group.size()), rows / group.size());
  }
  std::vector<std::int64_t> checked = checked_splits(splits.input_splits, "input_splits", group, op);
  const std::int64_t total = std::accumulate(checked.begin(), checked.end(), std::int64_t{0});
  if (total != rows) {
    throw InvalidArgument(std::string(op) + ": input_splits add up to " + std::to_string(total) +
                          " rows but input has " + std::to_string(rows));
  }
  return checked;
}

std::string dtype_label(std::int64_t raw) {
  if (raw >= 0 && raw <= 255 && is_valid_dtype(static_cast<std::uint8_t>(raw))) {
    return std::string(dtype_name(static_cast<DType>(raw)));
  }
  return "dtype #" + std::to_string(raw);
}

// The small round: each rank tells rank r how many rows it sends there, with its dtype and row
// size so that a peer holding something else is rejected on every rank before any data moves.
std::vector<std::int64_t> learn_output_splits(const std::vector<std::int64_t>& input_splits, const Tensor& input,
                                              std::int64_t row_numel, const Group& group, std::string_view op) {
  constexpr std::int64_t kWords = 3;
  const auto n = static_cast<std::size_t>(group.size());
  std::vector<std::int64_t> outgoing;
  for (std::int64_t rows : input_splits) {
    outgoing.insert(outgoing.end(), {rows, static_cast<std::int64_t>(input.dtype()), row_numel});
  }
  const Tensor send = int64_tensor(outgoing);
  const Tensor received = Tensor::empty({static_cast<std::int64_t>(n * kWords)}, {DType::Int64});
  const std::vector<std::int64_t> counts(n, kWords);
  metadata_backend(group).all_to_all(received, send, counts, counts)->wait();
  const std::vector<std::int64_t> incoming = int64_values(received);
  std::vector<std::int64_t> output_splits(n);
  for (std::size_t r = 0; r < n; ++r) {
    const std::int64_t rows = incoming[r * kWords];
    const std::int64_t dtype = incoming[r * kWords + 1];
    const std::int64_t peer_row_numel = incoming[r * kWords + 2];
    if (dtype != static_cast<std::int64_t>(input.dtype()) || peer_row_numel != row_numel) {
      throw InvalidArgument(std::string(op) + ": rank " + std::to_string(r) + "'s input is " + dtype_label(dtype) +
                            " with rows of " + std::to_string(peer_row_numel) + " elements, this rank's is " +
                            std::string(dtype_name(input.dtype())) + " with rows of " + std::to_string(row_numel));
    }
    if (rows < 0) {
      throw CorruptData(std::string(op) + ": rank " + std::to_string(r) + " announced " + std::to_string(rows) +
                        " rows");
    }
    output_splits[r] = rows;
  }
  return output_splits;
}

std::vector<std::int64_t> element_counts(const std::vector<std::int64_t>& row_splits, std::int64_t row_numel,
                                         std::string_view op) {
  std::vector<std::int64_t> counts;
  counts.reserve(row_splits.size());
  for (std::int64_t rows : row_splits) counts.push_back(rows_times(rows, row_numel, op));
  return counts;
}

// ---- batch_isend_irecv ----------------------------------------------------------------------------

void check_p2p_op(const P2POp& op, std::size_t index, const Tensor& first, const Group& group) {
  constexpr std::string_view name = "batch_isend_irecv";
  const std::string item = "ops[" + std::to_string(index) + "]";
  if (op.kind != P2POp::Kind::Send && op.kind != P2POp::Kind::Recv) {
    throw InvalidArgument(std::string(name) + ": " + item + ".kind is neither Send nor Recv");
  }
  check_defined(op.tensor, item + ".tensor", name);
  check_rank(op.peer, item + ".peer", group, name);
  check_tag(op.tag, item + ".tag", name);
  if (op.tensor.device() != first.device()) {
    throw InvalidArgument(std::string(name) + ": " + item + ".tensor is on " + op.tensor.device().str() +
                          " but ops[0].tensor on " + first.device().str() + "; one batch moves one device's tensors");
  }
}

}  // namespace

// ---- broadcast and reductions -------------------------------------------------------------------------

WorkPtr broadcast_async(const Tensor& tensor, int root, const Group& group) {
  constexpr std::string_view op = "broadcast";
  check_tensor_collective(tensor, group, {.op = op, .root = root, .tensor = &tensor},
                          [&] { check_rank(root, "src", group, op); });
  const Tensor packed = tensor.contiguous();
  WorkPtr work = group.backend(tensor.device()).broadcast(packed, root);
  if (group.rank() == root) return work;
  return then_copy_back(std::move(work), tensor, packed);
}

void broadcast(const Tensor& tensor, int root, const Group& group) { broadcast_async(tensor, root, group)->wait(); }

WorkPtr all_reduce_async(const Tensor& tensor, const Group& group, ReduceOp op) {
  constexpr std::string_view name = "all_reduce";
  check_tensor_collective(tensor, group, {.op = name, .reduction = op, .tensor = &tensor},
                          [&] { check_reduce_op(op, tensor.dtype(), name); });
  const Tensor packed = tensor.contiguous();
  return then_copy_back(group.backend(tensor.device()).all_reduce(packed, op), tensor, packed);
}

void all_reduce(const Tensor& tensor, const Group& group, ReduceOp op) { all_reduce_async(tensor, group, op)->wait(); }

WorkPtr reduce_async(const Tensor& tensor, int root, const Group& group, ReduceOp op) {
  constexpr std::string_view name = "reduce";
  check_tensor_collective(tensor, group, {.op = name, .root = root, .reduction = op, .tensor = &tensor}, [&] {
    check_rank(root, "dst", group, name);
    check_reduce_op(op, tensor.dtype(), name);
  });
  const Tensor packed = tensor.contiguous();
  WorkPtr work = group.backend(tensor.device()).reduce(packed, root, op);
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
  WorkPtr work = group.backend(tensor.device()).all_gather(output, tensor.contiguous());
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
  WorkPtr work = group.backend(tensor.device()).all_gather(output, tensor.contiguous());
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
  WorkPtr work = group.backend(tensor.device()).gather(output, tensor.contiguous(), root);
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
  const Tensor output = Tensor::empty(block.shape, {block.dtype, device});
  const Tensor stacked = is_root ? Tensor::stack(inputs) : Tensor{};
  // The output's device, not `device`: allocation resolved "the current CUDA device" to an index.
  return {group.backend(output.device()).scatter(output, stacked, root), output};
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
  WorkPtr work = group.backend(output.device()).reduce_scatter(output, Tensor::stack(inputs), op);
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
      invalid(name, "input of shape " + shape_str(input.shape()) + " does not split into " +
                        std::to_string(group.size()) + " equal blocks along dimension 0");
    }
  });
  Shape shape = input.shape();
  shape[0] /= group.size();
  const Tensor output = empty_like_shape(std::move(shape), input);
  WorkPtr work = group.backend(input.device()).reduce_scatter(output, input.contiguous(), op);
  return {std::move(work), output};
}

Tensor reduce_scatter_tensor(const Tensor& input, const Group& group, ReduceOp op) {
  return reduce_scatter_tensor_async(input, group, op).get();
}

// ---- all_to_all ------------------------------------------------------------------------------------

Pending<std::vector<Tensor>> all_to_all_async(std::span<const Tensor> inputs, const Group& group) {
  constexpr std::string_view op = "all_to_all";
  check_member(group, op);
  check_collective({.op = op, .tensor = first_of(inputs)}, group,
                   [&] { check_per_rank_list(inputs, "inputs", group, op); });
  const Tensor stacked = Tensor::stack(inputs);
  const Tensor output = empty_like_shape(stacked.shape(), stacked);
  const std::vector<std::int64_t> counts(inputs.size(), inputs[0].numel());
  WorkPtr work = group.backend(output.device()).all_to_all(output, stacked, counts, counts);
  return {std::move(work), blocks_of(output)};
}

std::vector<Tensor> all_to_all(std::span<const Tensor> inputs, const Group& group) {
  auto pending = all_to_all_async(inputs, group);
  return std::move(pending.get());
}

Pending<Tensor> all_to_all_single_async(const Tensor& input, const Group& group, const AllToAllSplits& splits) {
  constexpr std::string_view op = "all_to_all_single";
  check_member(group, op);
  // Ranks may send different numbers of rows: only the dtype must agree.
  check_collective({.op = op, .tensor = &input, .same_shape = false}, group, [&] {
    check_defined(input, "input", op);
    if (input.dim() == 0) invalid(op, "input is zero-dimensional and has no rows to split");
  });
  const Shape row_shape(input.shape().begin() + 1, input.shape().end());
  const std::int64_t row_numel = numel_of(row_shape);
  const std::vector<std::int64_t> input_splits = input_splits_for(input, splits, group, op);
  const std::vector<std::int64_t> output_splits =
      splits.output_splits.empty() ? learn_output_splits(input_splits, input, row_numel, group, op)
                                   : checked_splits(splits.output_splits, "output_splits", group, op);
  const std::int64_t output_rows = std::accumulate(output_splits.begin(), output_splits.end(), std::int64_t{0});
  const Tensor output = empty_like_shape(with_leading(output_rows, row_shape), input);
  WorkPtr work = group.backend(input.device())
                     .all_to_all(output, input.contiguous(), element_counts(output_splits, row_numel, op),
                                 element_counts(input_splits, row_numel, op));
  return {std::move(work), output};
}

Tensor all_to_all_single(const Tensor& input, const Group& group, const AllToAllSplits& splits) {
  return all_to_all_single_async(input, group, splits).get();
}

// ---- barrier -----------------------------------------------------------------------------------------

WorkPtr barrier_async(const Group& group) {
  check_member(group, "barrier");
  check_collective({.op = "barrier"}, group, [] {});
  return metadata_backend(group).barrier();
}

void barrier(const Group& group) { barrier_async(group)->wait(); }

// ---- point to point ------------------------------------------------------------------------------------

WorkPtr isend(const Tensor& tensor, int dst, const Group& group, const CommOptions& options) {
  const int tag = options.tag;
  constexpr std::string_view op = "send";
  check_tensor_op(tensor, group, op);
  check_rank(dst, "dst", group, op);
  check_tag(tag, "tag", op);
  return group.backend(tensor.device()).send(tensor.contiguous(), dst, tag);
}

void send(const Tensor& tensor, int dst, const Group& group, const CommOptions& options) {
  isend(tensor, dst, group, options)->wait();
}

WorkPtr irecv(const Tensor& tensor, int src, const Group& group, const CommOptions& options) {
  const int tag = options.tag;
  constexpr std::string_view op = "recv";
  check_tensor_op(tensor, group, op);
  if (src != kAnySource) check_rank(src, "src", group, op);
  check_tag(tag, "tag", op);
  // The received bytes overwrite everything, so a non-contiguous view needs only an empty buffer.
  const Tensor landing = tensor.is_contiguous() ? tensor : empty_like_shape(tensor.shape(), tensor);
  return then_copy_back(group.backend(tensor.device()).recv(landing, src, tag), tensor, landing);
}

void recv(const Tensor& tensor, int src, const Group& group, const CommOptions& options) {
  irecv(tensor, src, group, options)->wait();
}

int recv_any(const Tensor& tensor, const Group& group, const CommOptions& options) {
  WorkPtr work = irecv(tensor, kAnySource, group, options);
  work->wait();
  return work->source_rank();
}

WorkPtr batch_isend_irecv(std::span<const P2POp> ops, const Group& group) {
  check_member(group, "batch_isend_irecv");
  if (ops.empty()) return Work::completed();
  for (std::size_t i = 0; i < ops.size(); ++i) check_p2p_op(ops[i], i, ops[0].tensor, group);
  std::vector<P2POp> packed_ops;
  std::vector<CopyBack> copies;
  for (const P2POp& op : ops) {
    P2POp packed = op;
    if (op.kind == P2POp::Kind::Send) {
      packed.tensor = op.tensor.contiguous();
    } else if (!op.tensor.is_contiguous()) {
      packed.tensor = empty_like_shape(op.tensor.shape(), op.tensor);
      copies.push_back({op.tensor, packed.tensor});
    }
    packed_ops.push_back(std::move(packed));
  }
  return then_copy_back(group.backend(ops[0].tensor.device()).batch_p2p(packed_ops), std::move(copies));
}

}  // namespace tensortree::dist
