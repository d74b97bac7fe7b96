// A tree channel's receiving side: every frame is checked as it arrives, from its header and
// length alone (sequence, kind, size bounds, the credit it was given), before anything is
// allocated for it; then schemas are decoded and trees checked against them as tree_comm does.
#include "channel/channel_state.hpp"
#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/transfer.hpp"
#include "tree/consolidation_access.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"

namespace tensortree {

using detail::FrameKind;

namespace {

const char* kind_name(FrameKind kind) {
  switch (kind) {
    case FrameKind::Schema: return "schema";
    case FrameKind::Data: return "tree";
    case FrameKind::Keepalive: return "keepalive";
    case FrameKind::Credit: return "credit";
    case FrameKind::Close: return "close";
  }
  return "unknown";
}

}  // namespace

link::Placement TreeChannel::State::placement() {
  return [this](const std::string& peer, std::span<const std::byte> header, std::size_t length) -> StoragePtr {
    const detail::Frame frame = detail::decode_frame(header, peer);
    if (frame.sequence != receive_sequence) {
      throw CorruptData(fmt::format("tree channel: the message from {} is number {} of the connection; expected {}",
                                    peer, frame.sequence, receive_sequence));
    }
    ++receive_sequence;
    // Frames wait here only until the caller's next call: more than the credit allows plus a few
    // credits and keepalives is a flood.
    if (++placed_frames > 2 * options.max_trees_in_flight + 64) {
      throw CorruptData(fmt::format("tree channel: {} sent more frames than its credit allows", peer));
    }
    if (frame.kind == FrameKind::Schema && last_placed == FrameKind::Schema) {
      throw CorruptData(fmt::format("tree channel: {} sent two layouts without a tree between them", peer));
    }
    last_placed = frame.kind;
    const std::uint64_t bound = frame.kind == FrameKind::Schema ? options.max_schema_bytes
                                : frame.kind == FrameKind::Data ? options.max_tree_bytes + kWireHeaderBytes
                                                                : 0;
    if (length > bound) {
      throw CorruptData(fmt::format("tree channel: {} announced a {} message of {} bytes; at most {} are accepted",
                                    peer, kind_name(frame.kind), length, bound));
    }
    if (frame.kind == FrameKind::Data) receive_credit.arrive(length, peer);
    if (length == 0) return nullptr;
    if (frame.kind == FrameKind::Schema) return Storage::allocate(length, Device::cpu());
    return arrivals.take(length, Device::cpu(), [&] { return Storage::allocate(length, Device::cpu()); });
  };
}

bool TreeChannel::State::pull(Clock::time_point until) {
  std::optional<link::Arrival> arrival = link->receive(until);
  if (!arrival) return false;
  --placed_frames;
  last_heard = Clock::now();
  const detail::Frame frame = detail::decode_frame(arrival->header, link_peer());
  switch (frame.kind) {
    case FrameKind::Keepalive: ++stats.keepalives_received; break;
    case FrameKind::Credit: send_credit.grant(frame.credit, link_peer()); break;
    case FrameKind::Close: peer_closed = true; break;
    case FrameKind::Schema:
    case FrameKind::Data: unread.push_back({frame.kind, std::move(*arrival)}); break;
  }
  return true;
}

void TreeChannel::State::drain() {
  while (!peer_closed && pull(Clock::now())) {
  }
}

void TreeChannel::State::report_credit_if_due(bool idle) {
  if (receive_credit.report_due(idle)) post_credit(receive_credit.report());
}

// The next tree that arrived by `until`; nullopt when none did. Timeout when the peer has been
// silent for longer than the channel's timeout; ChannelClosed once the trees its peer sent before
// closing are taken.
std::optional<detail::ArrivedTree> TreeChannel::State::next_tree(Clock::time_point until) {
  for (;;) {
    sending_before_receiving([&] { progress_posts(); });
    while (!unread.empty()) {
      detail::UnreadFrame frame = std::move(unread.front());
      unread.pop_front();
      if (frame.kind == FrameKind::Schema) {
        take_schema(frame.arrival);
        continue;
      }
      detail::ArrivedTree tree = take_tree(frame.arrival);
      sending_before_receiving([&] { report_credit_if_due(/*idle=*/false); });
      return tree;
    }
    throw_if_peer_closed();
    // A caller back after longer than the timeout first takes what arrived meanwhile (each frame
    // moves last_heard): the silence it measures is the peer's, not its own.
    if (pull(Clock::now())) continue;
    sending_before_receiving([&] {
      report_credit_if_due(/*idle=*/true);
      keep_alive_if_quiet();
    });
    const Clock::time_point silent_limit = last_heard + options.timeout;
    if (Clock::now() < silent_limit && pull(std::min(until, silent_limit))) continue;
    if (Clock::now() < silent_limit) return std::nullopt;
    throw Timeout(fmt::format("tree channel: {} sent nothing for {} ms (the channel's timeout)", link_peer(),
                              options.timeout.count()));
  }
}

detail::ArrivedTree TreeChannel::State::wait_tree() {
  std::optional<detail::ArrivedTree> tree = next_tree(Clock::time_point::max());
  return std::move(*tree);
}

void TreeChannel::State::take_schema(const link::Arrival& arrival) {
  auto decoded = std::make_shared<const Schema>(Schema::decode({arrival.buffer->data(), arrival.length}));
  if (decoded->storage_device() == DeviceType::CUDA && cuda_device_count() == 0) {
    throw NotSupported(fmt::format("tree channel: {} sends trees of CUDA memory; this process sees no GPU",
                                   link_peer()));
  }
  if (decoded->storage_device() != DeviceType::CPU && decoded->storage_device() != DeviceType::CUDA) {
    throw CorruptData(fmt::format("tree channel: {} announced a tree of neither host nor CUDA memory", link_peer()));
  }
  if (decoded->total_bytes() > options.max_tree_bytes) {
    throw CorruptData(fmt::format("tree channel: {} announced a tree of {} bytes; at most {} are accepted",
                                  link_peer(), decoded->total_bytes(), options.max_tree_bytes));
  }
  schema = std::move(decoded);
  ++stats.schemas_received;
}

detail::ArrivedTree TreeChannel::State::take_tree(const link::Arrival& arrival) {
  receive_credit.take();
  if (!schema) {
    throw CorruptData(fmt::format("tree channel: {} sent a tree before its layout", link_peer()));
  }
  const std::uint64_t total = schema->total_bytes();
  if (arrival.length != total + kWireHeaderBytes) {
    throw SchemaMismatch(fmt::format(
        "tree channel: {} sent a tree of {} bytes; the layout it announced (fingerprint {}) has {} + a {}-byte header",
        link_peer(), arrival.length, schema->fingerprint(), total, kWireHeaderBytes));
  }
  const detail::WireHeader header =
      detail::read_wire_header(arrival.buffer->data() + total, Device::cpu(), link_peer(), "tree channel");
  if (!detail::announces(header, *schema)) {
    throw SchemaMismatch(fmt::format(
        "tree channel: the tree from {} says fingerprint {}, {} bytes; its announced layout is fingerprint {}, {} bytes",
        link_peer(), header.fingerprint, header.payload_bytes, schema->fingerprint(), total));
  }
  ++stats.trees_received;
  if (schema->storage_device() == DeviceType::CUDA) return {schema, upload(arrival.buffer, total)};
  return {schema, arrival.buffer};
}

// A CUDA tree's bytes, staged through host memory, back on this thread's current GPU.
StoragePtr TreeChannel::State::upload(const StoragePtr& staged, std::uint64_t total) {
  const Device device = Device::cuda(cuda::current_device());
  StoragePtr on_device = arrivals.take(total, device, [&] { return Storage::allocate(total, device); });
  detail::copy_bytes(on_device->data(), device, staged->data(), Device::cpu(), total);
  return on_device;
}

// The tree recv() returns for what arrived: its leaves view the arrived buffer.
TensorTree TreeChannel::State::tree_of(detail::ArrivedTree arrived) {
  if (arrived.schema->total_bytes() > kPrototypeBytes) {
    return TensorTree::from_consolidated(std::move(arrived.buffer), std::move(arrived.schema));
  }
  if (!prototype || prototype->schema() != arrived.schema) {
    prototype = TensorTree::from_consolidated(std::move(arrived.buffer), std::move(arrived.schema));
    return *prototype;
  }
  TensorTree tree = *prototype;
  detail::ConsolidationAccess::rebind(tree, std::move(arrived.buffer));
  return tree;
}

}  // namespace tensortree
