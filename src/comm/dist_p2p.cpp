// Point-to-point operations of dist_ops: send, receive (from one rank or any), and a batch of both
// posted as one Work.
#include "tensortree/dist_ops.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "comm/dist_internal.hpp"
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

// A batch with one peer takes that peer's transport, as isend and irecv do: NCCL, the group's
// backend between GPUs, refuses a send to the own rank unless its receive is in the same batch.
// A batch with several peers takes the group's backend, which reaches them all.
Backend& batch_transport(std::span<const P2POp> ops, const Group& group) {
  const int peer = ops[0].peer;
  const Device device = ops[0].tensor.device();
  const bool one_peer = std::all_of(ops.begin(), ops.end(), [peer](const P2POp& op) { return op.peer == peer; });
  return one_peer ? group.transport(peer, device) : group.backend(device);
}

}  // namespace

// ---- point to point ------------------------------------------------------------------------------------

WorkPtr isend(const Tensor& tensor, int dst, const Group& group, const CommOptions& options) {
  const int tag = options.tag;
  constexpr std::string_view op = "send";
  check_tensor_op(tensor, group, op);
  check_rank(dst, "dst", group, op);
  check_tag(tag, "tag", op);
  return group.transport(dst, tensor.device()).send(tensor.contiguous(), dst, tag);
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
  return then_copy_back(peer_transport(group, src, tensor.device()).recv(landing, src, tag), tensor, landing);
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
  return then_copy_back(batch_transport(ops, group).batch_p2p(packed_ops), std::move(copies));
}

}  // namespace tensortree::dist
