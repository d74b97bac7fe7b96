// Point-to-point operations of dist_ops: send, receive (from one rank or any), and a batch of both
// posted as one Work.
#include "tensortree/dist_ops.hpp"

#include <string>
#include <utility>

#include "comm/dist_internal.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::dist {

using namespace detail;

namespace {

// The common prologue of point-to-point operations on one tensor.
void check_tensor_op(const Tensor& tensor, const Group& group, std::string_view op) {
  check_member(group, op);
  check_defined(tensor, "tensor", op);
}

// ---- batch_isend_irecv ----------------------------------------------------------------------------

void check_p2p_op(const P2POp& op, std::size_t index, const Tensor& first, const Group& group) {
  constexpr std::string_view name = "batch_isend_irecv";
  const std::string item = fmt::format("ops[{}]", index);
  if (op.kind != P2POp::Kind::Send && op.kind != P2POp::Kind::Recv) {
    throw InvalidArgument(fmt::format("{}: {}.kind is neither Send nor Recv", name, item));
  }
  check_defined(op.tensor, fmt::format("{}.tensor", item), name);
  check_rank(op.peer, fmt::format("{}.peer", item), group, name);
  check_tag(op.tag, fmt::format("{}.tag", item), name);
  if (op.tensor.device() != first.device()) {
    throw InvalidArgument(fmt::format("{}: {}.tensor is on {} but ops[0].tensor on {}; one batch moves one device's "
                                      "tensors", name, item, op.tensor.device(), first.device()));
  }
}

}  // namespace

// ---- point to point ------------------------------------------------------------------------------------

WorkPtr isend(const Tensor& tensor, int dst, const Group& group, const CommOptions& options) {
  const CudaStreamGuard ordering(options.stream);
  const int tag = options.tag;
  constexpr std::string_view op = "send";
  check_tensor_op(tensor, group, op);
  check_rank(dst, "dst", group, op);
  check_tag(tag, "tag", op);
  const Tensor contiguous = tensor.contiguous();
  return post_to_peer(group, dst, tensor.device(), "send",
                      [&](PeerTransport& on) { return on.send(contiguous, dst, tag); });
}

void send(const Tensor& tensor, int dst, const Group& group, const CommOptions& options) {
  isend(tensor, dst, group, options)->wait();
}

WorkPtr irecv(const Tensor& tensor, int src, const Group& group, const CommOptions& options) {
  const CudaStreamGuard ordering(options.stream);
  const int tag = options.tag;
  constexpr std::string_view op = "recv";
  check_tensor_op(tensor, group, op);
  if (src != kAnySource) check_rank(src, "src", group, op);
  check_tag(tag, "tag", op);
  // The received bytes overwrite everything, so a non-contiguous view needs only an empty buffer.
  const Tensor landing = tensor.is_contiguous() ? tensor : empty_like_shape(tensor.shape(), tensor);
  WorkPtr received =
      post_to_peer(group, src, tensor.device(), "recv", [&](PeerTransport& on) { return on.recv(landing, src, tag); });
  return then_copy_back(std::move(received), tensor, landing);
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
  return then_copy_back(post_batch(group, packed_ops), std::move(copies));
}

}  // namespace tensortree::dist
