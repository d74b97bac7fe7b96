// What the dist_ops files share (dist_internal.hpp): argument checks, byte views of tensors, the
// point-to-point data round, copy-back continuations and the shapes of per-rank outputs.
#include "comm/dist_internal.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "comm/group_state.hpp"
#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/error.hpp"

namespace tensortree::dist::detail {

namespace {

std::string describe(const Tensor& tensor) {
  return fmt::format("{}{} on {}", tensor.dtype(), shape_str(tensor.shape()), tensor.device());
}

}  // namespace

[[noreturn]] void invalid(std::string_view op, const std::string& message) {
  throw InvalidArgument(fmt::format("{}: {}", op, message));
}

// The first reason `tensors` is not one tensor per rank of a single shape, dtype and device; empty
// when there is none. scatter sends it to its receivers instead of throwing at once.
std::string per_rank_list_problem(std::span<const Tensor> tensors, std::string_view name, const Group& group) {
  const std::string list(name);
  if (static_cast<int>(tensors.size()) != group.size()) {
    return fmt::format("{} holds {} tensors; the group has {} ranks and needs one per rank", list, tensors.size(),
                       group.size());
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string item = fmt::format("{}[{}]", list, i);
    if (!tensors[i].defined()) return fmt::format("{} is undefined", item);
    const Tensor& first = tensors[0];
    if (tensors[i].dtype() != first.dtype() || tensors[i].shape() != first.shape() ||
        tensors[i].device() != first.device()) {
      return fmt::format("{} is {} but {}[0] is {}; every rank's tensor needs one shape, dtype and device", item,
                         describe(tensors[i]), list, describe(first));
    }
  }
  return {};
}

void check_member(const Group& group, std::string_view op) {
  if (group.size() == 0) invalid(op, "group is an empty Group (no communicator)");
  if (!group.is_member()) invalid(op, "this process is not a member of group");
}

void check_rank(int rank, std::string_view name, const Group& group, std::string_view op) {
  if (rank < 0 || rank >= group.size()) {
    invalid(op, fmt::format("{} {} is outside the group of {} ranks", name, rank, group.size()));
  }
}

void check_defined(const Tensor& tensor, std::string_view name, std::string_view op) {
  if (!tensor.defined()) invalid(op, fmt::format("{} is undefined", name));
}

void check_tag(int tag, std::string_view name, std::string_view op) {
  if (tag < 0 || tag > kMaxUserTag) {
    invalid(op, fmt::format("{} {} is outside 0..{}", name, tag, kMaxUserTag));
  }
}

void check_per_rank_list(std::span<const Tensor> tensors, std::string_view name, const Group& group,
                         std::string_view op) {
  const std::string problem = per_rank_list_problem(tensors, name, group);
  if (!problem.empty()) invalid(op, problem);
}

Collectives& metadata_collectives(const Group& group) { return group.collectives(Device::cpu()); }

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
  ops_.push_back({P2POp::Kind::Send, contiguous.byte_view(), peer, kInternalTag});
}

void ByteExchange::recv(const Tensor& contiguous, int peer) {
  if (contiguous.nbytes() == 0) return;
  ops_.push_back({P2POp::Kind::Recv, contiguous.byte_view(), peer, kInternalTag});
}

WorkPtr ByteExchange::post(const Group& group) const {
  if (ops_.empty()) return Work::completed();
  return post_batch(group, ops_);
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

std::vector<std::int64_t> announce_words(std::span<const std::int64_t> words, int root, const Group& group) {
  const Tensor message = int64_tensor(words);
  metadata_collectives(group).broadcast(message, root)->wait();
  return int64_values(message);
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
    throw InvalidArgument(fmt::format("{}: {} rows times {} overflows int64", op, rows, factor));
  }
  return *product;
}

PeerTransport& peer_transport(const Group& group, int peer, Device device) {
  return peer == kAnySource ? group.any_source_transport(device) : group.transport(peer, device);
}

WorkPtr post_to_peer(const Group& group, int peer, Device device, const char* operation, const PostOn& post) {
  PeerTransport& transport = peer_transport(group, peer, device);
  WorkPtr work = post(transport);
  return tensortree::detail::GroupAccess::require(group).progressing(device, transport, std::move(work), operation);
}

// Each transport's ops keep their order; transports are posted in the order their first op comes.
WorkPtr post_batch(const Group& group, std::span<const P2POp> ops) {
  const Device device = ops.front().tensor.device();
  std::vector<std::pair<PeerTransport*, std::vector<P2POp>>> batches;
  for (const P2POp& op : ops) {
    PeerTransport* transport = &group.transport(op.peer, device);
    const auto found =
        std::find_if(batches.begin(), batches.end(), [&](const auto& batch) { return batch.first == transport; });
    if (found != batches.end()) {
      found->second.push_back(op);
    } else {
      batches.push_back({transport, {op}});
    }
  }
  // Every batch is posted before any gets the other transports' progress hooks: a transport decides
  // whether a Work needs its hook from the receives it has waiting, which a later batch may post.
  std::vector<std::pair<PeerTransport*, WorkPtr>> posted;
  for (const auto& [transport, batch] : batches) posted.emplace_back(transport, transport->batch_p2p(batch));
  tensortree::detail::GroupState& state = tensortree::detail::GroupAccess::require(group);
  std::vector<WorkPtr> works;
  for (auto& [transport, work] : posted) works.push_back(state.progressing(device, *transport, std::move(work), "batch_p2p"));
  return works.size() == 1 ? works.front() : Work::all(std::move(works));
}

}  // namespace tensortree::dist::detail
