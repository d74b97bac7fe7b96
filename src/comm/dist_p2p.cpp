// Point-to-point operations of dist_ops: send, receive (from one rank or any), and a batch of both
// posted as one Work.
#include "tensortree/dist_ops.hpp"

#include <string>
#include <utility>

#include "comm/collective_check.hpp"
#include "comm/dist_internal.hpp"
#include "comm/p2p_check.hpp"
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

// In debug mode a send goes after its header (p2p_check.hpp), on the same transport, peer and tag.
WorkPtr send_on(PeerTransport& on, const Tensor& contiguous, int dst, int tag, const Group& group, bool debug) {
  if (!debug) return on.send(contiguous, dst, tag);
  WorkPtr header = on.send(p2p_header(contiguous, group.rank()), dst, tag);
  return Work::all({std::move(header), on.send(contiguous, dst, tag)});
}

// In debug mode a receive takes the header first and checks it against `landing` once the data is
// in (or the data's receive failed: a clearer error when the header says why). From any source,
// the data is then received from the header's sender, so that the two cannot come from two ranks.
WorkPtr recv_on(PeerTransport& on, const Tensor& landing, int src, int tag, const Group& group, bool debug) {
  if (!debug) return on.recv(landing, src, tag);
  constexpr std::string_view op = "recv";
  const Tensor header = p2p_header_buffer(landing);
  const auto check = [header, landing, group] { check_p2p_header(header, landing, group, op); };
  if (src != kAnySource) {
    WorkPtr header_work = on.recv(header, src, tag);
    // The data's receive failed (another length, say): the header, where it arrived, says why.
    const auto explain = [check, header_work](std::exception_ptr error) {
      if (header_work->is_completed() && !header_work->exception()) check();
      std::rethrow_exception(error);
    };
    return Work::then(Work::all({header_work, on.recv(landing, src, tag)}), check, explain);
  }
  WorkPtr header_work = on.recv(header, kAnySource, tag);
  WorkPtr data = Work::chain(header_work, [header, landing, group, tag, check]() -> WorkPtr {
    // A garbled header or another length throws here: the data cannot be received into `landing`.
    const int sender = p2p_header_sender(header);
    if (sender < 0 || !p2p_header_bytes_match(header, landing)) check();
    return group.transport(sender, landing.device()).recv(landing, sender, tag);
  });
  return Work::then(std::move(data), check);
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
  const bool debug = debug_mode_enabled(group);
  return post_to_peer(group, dst, tensor.device(), "send",
                      [&](PeerTransport& on) { return send_on(on, contiguous, dst, tag, group, debug); });
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
  const bool debug = debug_mode_enabled(group);
  WorkPtr received = post_to_peer(group, src, tensor.device(), "recv", [&](PeerTransport& on) {
    return recv_on(on, landing, src, tag, group, debug);
  });
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
  const bool debug = debug_mode_enabled(group);
  std::vector<P2POp> packed_ops;
  std::vector<CopyBack> copies;
  // In debug mode each op goes after its header (as send and irecv do); the received headers are
  // checked once the batch is complete.
  std::vector<std::pair<Tensor, Tensor>> received_headers;
  for (const P2POp& op : ops) {
    P2POp packed = op;
    if (op.kind == P2POp::Kind::Send) {
      packed.tensor = op.tensor.contiguous();
    } else if (!op.tensor.is_contiguous()) {
      packed.tensor = empty_like_shape(op.tensor.shape(), op.tensor);
      copies.push_back({op.tensor, packed.tensor});
    }
    if (debug) {
      const bool sending = op.kind == P2POp::Kind::Send;
      Tensor header = sending ? p2p_header(packed.tensor, group.rank()) : p2p_header_buffer(packed.tensor);
      if (!sending) received_headers.emplace_back(header, packed.tensor);
      packed_ops.push_back({op.kind, std::move(header), op.peer, op.tag});
    }
    packed_ops.push_back(std::move(packed));
  }
  WorkPtr posted = post_batch(group, packed_ops);
  if (!received_headers.empty()) {
    posted = Work::then(std::move(posted), [received_headers, group] {
      for (const auto& [header, tensor] : received_headers) check_p2p_header(header, tensor, group, "batch_isend_irecv");
    });
  }
  return then_copy_back(std::move(posted), std::move(copies));
}

}  // namespace tensortree::dist
