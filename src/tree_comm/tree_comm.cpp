// TensorTree's point-to-point methods: send/recv/isend/irecv and init_remote/from_remote_init, over
// dist_ops and the PeerTransport interface (no MPI or NCCL here). Wire format: transfer.hpp.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/collective_check.hpp"
#include "comm/dist_internal.hpp"
#include "comm/peer_claims.hpp"
#include "core/text_format.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"
#include "tree/consolidation_access.hpp"
#include "tree_comm/tree_comm_internal.hpp"
#include "tree_comm/group_buffers.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"

namespace tensortree {

namespace {

using detail::Outgoing;
using detail::WireHeader;

void check_peer(int peer, const char* name, const Group& group, std::string_view op, bool any_source_ok) {
  dist::detail::check_member(group, op);
  if (!(any_source_ok && peer == kAnySource)) dist::detail::check_rank(peer, name, group, op);
}

// The payload with its wire header written behind it, sent as one message.
WorkPtr post_consolidated(const Outgoing& out, Device device, int dst, const Group& group, int tag) {
  const std::uint64_t total = out.schema->total_bytes();
  detail::write_trailing_header({out.schema->fingerprint(), total, 0}, out.buffer, total);
  const Tensor message = detail::storage_bytes(out.buffer, 0, total + kWireHeaderBytes);
  return dist::detail::post_to_peer(group, dst, device, "send",
                                    [&](PeerTransport& on) { return on.send(message, dst, tag); });
}

// The leaves with bytes, in layout order: the order both ends agree on whatever their insertion order.
std::vector<Tensor> leaves_in_layout_order(const TensorTree& tree, Device device) {
  std::vector<Tensor> leaves;
  const std::shared_ptr<const Schema> schema = detail::layout_of(tree, device).schema;
  for (const LeafSpec& spec : schema->leaves()) {
    if (spec.nbytes > 0) leaves.push_back(tree.get(schema->path_of(spec)));
  }
  return leaves;
}

WorkPtr post_per_leaf(const TensorTree& tree, Device device, P2POp::Kind kind, int peer, const Group& group, int tag) {
  std::vector<P2POp> ops;
  for (Tensor& leaf : leaves_in_layout_order(tree, device)) ops.push_back({kind, std::move(leaf), peer, tag});
  return dist::batch_isend_irecv(ops, group);
}

std::string layout_text(std::uint64_t fingerprint, std::uint64_t bytes) {
  return fmt::format("layout {:#018x}, {} bytes", fingerprint, bytes);
}

// A consolidated receive: complete once the message has arrived, its wire header matched the
// expected layout, and `deliver` has moved the payload where it belongs. A message of the wrong
// length is SchemaMismatch too (the transport found it).
using Deliver = std::function<void(const StoragePtr&)>;

WorkPtr post_tree_receive(const StoragePtr& buffer, std::shared_ptr<const Schema> schema, int src, const Group& group,
                          int tag, Deliver deliver) {
  const std::uint64_t total = schema->total_bytes();
  const std::uint64_t length = total + kWireHeaderBytes;
  const Tensor landing = detail::storage_bytes(buffer, 0, length);
  WorkPtr transfer = dist::detail::post_to_peer(group, src, buffer->device(), "recv",
                                                [&](PeerTransport& on) { return on.recv(landing, src, tag); });
  // A raw pointer: the Work returned holds `transfer` for as long as the continuation can run.
  Work* received = transfer.get();
  // The transport reports a message of the wrong length as InvalidArgument: to the caller it is a
  // layout mismatch.
  auto on_error = [schema, src, group, tag](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const InvalidArgument&) {
      throw SchemaMismatch(detail::layout_mismatch(group, "recv", src, tag, *schema, std::nullopt));
    } catch (...) {
    }
  };
  auto check_and_deliver = [buffer, schema, src, group, tag, total, received, deliver = std::move(deliver)] {
    const int sender = src == kAnySource ? received->source_rank() : src;
    const WireHeader header = detail::read_wire_header(buffer->data() + total, buffer->device(), detail::rank_name(sender), "recv");
    if (!detail::announces(header, *schema)) {
      throw SchemaMismatch(detail::layout_mismatch(group, "recv", sender, tag, *schema, header.fingerprint));
    }
    deliver(buffer);
  };
  return Work::then(std::move(transfer), std::move(check_and_deliver), std::move(on_error));
}

// The wire header at the end of `bytes` when they are a whole tree message (payload, then header):
// what a plain send puts on the wire.
std::optional<detail::WireHeader> tree_data_header(const Tensor& bytes, int sender) {
  if (bytes.nbytes() < kWireHeaderBytes) return std::nullopt;
  const auto* end = static_cast<const std::byte*>(bytes.data_ptr()) + bytes.nbytes();
  try {
    const detail::WireHeader header = detail::read_wire_header(end - kWireHeaderBytes, Device::cpu(), detail::rank_name(sender), "recv");
    if (header.schema_bytes == 0 && header.payload_bytes == bytes.nbytes() - kWireHeaderBytes) return header;
  } catch (const CorruptData&) {
  }
  return std::nullopt;
}

// The schema that init_remote sent first (or, in debug mode, any send). A peer that sent its tree
// with a plain send instead is told apart from corrupt bytes: the mistake is the pairing, not the data.
std::shared_ptr<const Schema> announced_schema(const ReceivedMessage& announced, std::string_view op) {
  const auto* first = static_cast<const std::byte*>(announced.bytes.data_ptr());
  try {
    return std::make_shared<const Schema>(Schema::decode({first, announced.bytes.nbytes()}));
  } catch (const CorruptData&) {
    const std::optional<detail::WireHeader> data = tree_data_header(announced.bytes, announced.source);
    if (!data) throw;
    if (op != "from_remote_init") {
      throw SchemaMismatch(fmt::format("{}: {} sent a tree's data ({}) without its layout ahead of it, as a sender "
                                       "in debug mode does: give every rank of the group the same debug setting "
                                       "(GroupOptions::debug_checks, TENSORTREE_DISTRIBUTED_DEBUG)",
                                       op, detail::rank_name(announced.source),
                                       layout_text(data->fingerprint, data->payload_bytes)));
    }
    throw SchemaMismatch(fmt::format("from_remote_init: {} sent a tree's data ({}), not its layout: it sent with "
                                     "a plain send, without init_remote. Pair from_remote_init with init_remote on "
                                     "the sender (a plain send goes to a receiver that holds a tree of the sender's "
                                     "layout)",
                                     detail::rank_name(announced.source),
                                     layout_text(data->fingerprint, data->payload_bytes)));
  }
}

Tensor bytes_tensor(std::span<const std::byte> bytes) {
  Tensor out = Tensor::empty({static_cast<std::int64_t>(bytes.size())}, {DType::UInt8});
  detail::copy_bytes(static_cast<std::byte*>(out.data_ptr()), Device::cpu(), bytes.data(), Device::cpu(), bytes.size());
  return out;
}

// The schema, then the payload with its wire header: init_remote's two messages, and in debug mode
// every send's, so that the receiver learns the sender's layout before it takes the data.
WorkPtr post_with_layout(const Outgoing& out, int dst, const Group& group, int tag) {
  const Tensor schema_bytes = bytes_tensor(out.schema->encode());
  WorkPtr schema_sent = dist::detail::post_to_peer(group, dst, Device::cpu(), "send",
                                                   [&](PeerTransport& on) { return on.send(schema_bytes, dst, tag); });
  WorkPtr data_sent = post_consolidated(out, out.device, dst, group, tag);
  return Work::all({std::move(schema_sent), std::move(data_sent)});
}

// A receive whose sender is known before it is posted: source_rank() names it, as for a receive
// from kAnySource.
class FromSender final : public Work {
 public:
  explicit FromSender(int sender) : sender_(sender) {}
  int source_rank() const override { return sender_; }

 protected:
  bool test() override { return true; }

 private:
  int sender_;
};

// Debug mode's receive: the sender's layout first (post_with_layout), checked before the data is
// received, so that a tree of another layout is told the first key that differs whether or not this
// rank had seen the sender's layout. Its data message is then taken into a buffer of its own and
// dropped, which keeps the pair's later messages in step. The data receive is posted before this
// returns, so that a later receive from kAnySource cannot take this sender's data for a layout.
WorkPtr receive_with_layout(TensorTree& tree, std::shared_ptr<const Schema> mine, Device device, int src,
                            const Group& group, const CommOptions& options) {
  const ReceivedMessage announced =
      dist::detail::peer_transport(group, src, Device::cpu()).recv_message(src, options.tag);
  const std::shared_ptr<const Schema> theirs = announced_schema(announced, "recv");
  const int sender = announced.source;
  detail::LayoutRegistry::of(group)->remember(theirs);
  if (theirs->fingerprint() != mine->fingerprint()) {
    const Device arrives_on = dist::detail::device_of_kind(theirs->storage_device());
    const std::uint64_t length = detail::checked_peer_claim(group, sender, {theirs->total_bytes(), kWireHeaderBytes},
                                                            "recv: the tree its layout announces");
    const StoragePtr dropped = Storage::allocate(length, arrives_on);
    const Tensor landing = detail::storage_bytes(dropped, 0, length);
    WorkPtr taken = dist::detail::post_to_peer(group, sender, arrives_on, "recv",
                                               [&](PeerTransport& on) { return on.recv(landing, sender, options.tag); });
    std::string mismatch = detail::layout_mismatch(group, "recv", sender, options.tag, *mine, theirs->fingerprint());
    return Work::then(std::move(taken), [dropped, mismatch] { throw SchemaMismatch(mismatch); });
  }
  const StoragePtr spare = detail::spare_buffer(group, mine->total_bytes() + kWireHeaderBytes, device);
  auto deliver = [target = &tree, mine, threads = options.threads](const StoragePtr& arrived) {
    detail::take_payload(*target, *mine, arrived, threads);
  };
  WorkPtr data = post_tree_receive(spare, mine, sender, group, options.tag, std::move(deliver));
  return Work::all({std::make_shared<FromSender>(sender), std::move(data)});
}

}  // namespace

// ---- send / recv -------------------------------------------------------------------------------------

WorkPtr TensorTree::isend(int dst, const Group& group, const CommOptions& options) const {
  const CudaStreamGuard ordering(options.stream);
  constexpr std::string_view op = "send";
  check_peer(dst, "dst", group, op, false);
  dist::detail::check_tag(options.tag, "tag", op);
  if (options.mode == TransferMode::PerLeaf) {
    return post_per_leaf(*this, detail::device_of(*this, op), P2POp::Kind::Send, dst, group, options.tag);
  }
  const Outgoing out = detail::pack_for_wire(*this, op, kWireHeaderBytes, group);
  if (dist::detail::debug_mode_enabled(group)) return post_with_layout(out, dst, group, options.tag);
  return post_consolidated(out, out.device, dst, group, options.tag);
}

// In the buffer that pack_for_wire would pack this tree into: with the wire header's room behind
// the payload and, where the group has shared memory, in it (own_buffer then sends it as it is).
TensorTree TensorTree::consolidate_for(const Group& group, const ConsolidateOptions& options) const {
  dist::detail::check_member(group, "consolidate_for");
  const detail::WalkedTree walked = detail::walk_for_packing(*this, options, "consolidate_for");
  ConsolidateOptions sendable = options;
  sendable.device = walked.target;
  sendable.reuse =
      detail::outgoing_buffer(group, walked.plan->schema->total_bytes() + kWireHeaderBytes, walked.target);
  detail::forget_trailing_header(sendable.reuse);
  return consolidate(sendable);
}

void TensorTree::send(int dst, const Group& group, const CommOptions& options) const {
  isend(dst, group, options)->wait();
}

WorkPtr TensorTree::irecv(int src, const Group& group, const CommOptions& options) {
  const CudaStreamGuard ordering(options.stream);
  constexpr std::string_view op = "recv";
  check_peer(src, "src", group, op, options.mode == TransferMode::Consolidated);
  dist::detail::check_tag(options.tag, "tag", op);
  const Device device = detail::device_of(*this, op);
  if (options.mode == TransferMode::PerLeaf) {
    return post_per_leaf(*this, device, P2POp::Kind::Recv, src, group, options.tag);
  }
  std::shared_ptr<const Schema> schema = detail::layout_of(*this, device).schema;
  if (dist::detail::debug_mode_enabled(group)) return receive_with_layout(*this, schema, device, src, group, options);
  const StoragePtr spare = detail::spare_buffer(group, schema->total_bytes() + kWireHeaderBytes, device);
  auto deliver = [this, schema, threads = options.threads](const StoragePtr& arrived) {
    detail::take_payload(*this, *schema, arrived, threads);
  };
  return post_tree_receive(spare, schema, src, group, options.tag, std::move(deliver));
}

int TensorTree::recv(int src, const Group& group, const CommOptions& options) {
  const WorkPtr work = irecv(src, group, options);
  work->wait();
  return src == kAnySource ? work->source_rank() : src;
}

// ---- init_remote / from_remote_init ----------------------------------------------------------------

void TensorTree::init_remote(int dst, const Group& group, const CommOptions& options) const {
  const CudaStreamGuard ordering(options.stream);
  constexpr std::string_view op = "init_remote";
  check_peer(dst, "dst", group, op, false);
  dist::detail::check_tag(options.tag, "tag", op);
  // The schema first: the receiver learns from it how long the data message is.
  post_with_layout(detail::pack_for_wire(*this, op, kWireHeaderBytes, group), dst, group, options.tag)->wait();
}

TensorTree TensorTree::from_remote_init(int src, const Group& group, const CommOptions& options) {
  const CudaStreamGuard ordering(options.stream);
  constexpr std::string_view op = "from_remote_init";
  check_peer(src, "src", group, op, true);
  dist::detail::check_tag(options.tag, "tag", op);
  const ReceivedMessage announced =
      dist::detail::peer_transport(group, src, Device::cpu()).recv_message(src, options.tag);
  auto schema = announced_schema(announced, op);
  detail::LayoutRegistry::of(group)->remember(schema, announced.source);
  const Device device = dist::detail::device_of_kind(schema->storage_device());
  // The schema is consistent, but its size is only the peer's word: bounded before allocating.
  const std::uint64_t length = detail::checked_peer_claim(group, announced.source,
                                                          {schema->total_bytes(), kWireHeaderBytes},
                                                          "from_remote_init: the tree its schema announces");
  const StoragePtr storage = Storage::allocate(length, device);
  post_tree_receive(storage, schema, announced.source, group, options.tag, [](const StoragePtr&) {})->wait();
  return from_consolidated(storage, std::move(schema));
}

}  // namespace tensortree
