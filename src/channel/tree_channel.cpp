// TreeChannel and TreeListener over the links of transport/ucx. A channel's receive side checks
// each frame header (kind, sequence, bounded length) before UCX moves the bytes, then decodes a
// schema with Schema::decode and a tree's wire header with read_wire_header, as tree_comm does.
#include "tensortree/tree_channel.hpp"

#include <thread>
#include <utility>

#include "channel/channel_access.hpp"
#include "channel/channel_frame.hpp"
#include "core/buffer_pool.hpp"
#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "transport/ucx/ucx_link.hpp"
#include "tree/consolidation_access.hpp"
#include "tree/layout_difference.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"
#include "wire/wire_pack.hpp"

namespace tensortree {

namespace {

using ucx::Clock;

// What a received tree refers to: its layout and the buffer it arrived in.
struct ArrivedTree {
  std::shared_ptr<const Schema> schema;
  StoragePtr buffer;
};

}  // namespace

struct TreeChannel::State {
  ChannelOptions options;
  std::unique_ptr<ucx::Link> link;
  ChannelStats stats;
  std::string closed_why;  // set by close(): the channel's calls then throw it

  // Sending: the layout the peer holds (none after a connect) and the next sequence number.
  std::uint64_t sent_fingerprint = 0;
  bool sent_schema = false;
  std::uint64_t send_sequence = 0;
  Clock::time_point last_sent = Clock::now();
  detail::BufferPool outgoing;
  // Posting: the tree handed to the link last (on its way or gone) and the one waiting behind it.
  std::shared_ptr<const detail::WireTree> last_posted;
  std::shared_ptr<const detail::WireTree> waiting;

  // Receiving: the sequence number the next frame must carry (checked as it arrives, inside
  // UCX's progress), the layout the peer announced last, and when it was last heard from.
  std::uint64_t receive_sequence = 0;
  std::shared_ptr<const Schema> schema;
  Clock::time_point last_heard = Clock::now();
  detail::BufferPool arrivals;
  // recv()'s trees of a layout of at most kPrototypeBytes are copies of this one (the first such
  // tree), moved to each arrived buffer: copying a tree's structure costs about a third of building
  // it from the schema (some 90 against 230 ns a leaf), most of a receive of many small leaves. It
  // holds the buffer it arrived in, hence the bound.
  static constexpr std::uint64_t kPrototypeBytes = 1 << 20;
  std::optional<TensorTree> prototype;

  explicit State(const ChannelOptions& opts) : options(opts) {}
  // The link goes first: closing it progresses UCX, which must find the pools still here.
  ~State() { link.reset(); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Where a message goes, decided from its frame header and length alone: refused (CorruptData)
  // when out of sequence or larger than the bounds allow.
  ucx::Placement placement() {
    return [this](const std::string& peer, std::span<const std::byte> header, std::size_t length) -> StoragePtr {
      const detail::Frame frame = detail::decode_frame(header, peer);
      if (frame.sequence != receive_sequence) {
        throw CorruptData(fmt::format("tree channel: the message from {} is number {} of the connection; expected {}",
                                      peer, frame.sequence, receive_sequence));
      }
      ++receive_sequence;
      const std::uint64_t bound = frame.kind == detail::FrameKind::Schema ? options.max_schema_bytes
                                  : frame.kind == detail::FrameKind::Data ? options.max_tree_bytes + kWireHeaderBytes
                                                                          : 0;
      if (length > bound) {
        throw CorruptData(fmt::format("tree channel: {} announced a {} message of {} bytes; at most {} are accepted",
                                      peer, kind_name(frame.kind), length, bound));
      }
      if (length == 0) return nullptr;
      if (frame.kind == detail::FrameKind::Schema) return Storage::allocate(length, Device::cpu());
      return arrivals.take(length, Device::cpu(), [&] { return Storage::allocate(length, Device::cpu()); });
    };
  }

  const std::string& link_peer() const { return link->peer(); }

  static const char* kind_name(detail::FrameKind kind) {
    switch (kind) {
      case detail::FrameKind::Schema: return "schema";
      case detail::FrameKind::Data: return "tree";
      case detail::FrameKind::Keepalive: return "keepalive";
    }
    return "unknown";
  }

  void check_open() const {
    if (!closed_why.empty()) throw PeerLost(closed_why);
  }

  // Any error of a call ends the channel: the link fails with it, and later calls throw it again.
  template <class Body>
  auto guarded(Body&& body) {
    check_open();
    try {
      return body();
    } catch (...) {
      link->fail(std::current_exception());
      throw;
    }
  }

  void send_frame(detail::FrameKind kind, const std::byte* data, std::size_t length) {
    const auto header = detail::encode_frame({kind, send_sequence});
    link->send(header, data, length, Clock::now() + options.timeout);
    ++send_sequence;
    last_sent = Clock::now();
  }

  // Posts a frame: its bytes are `keep`'s (null for none).
  void post_frame(detail::FrameKind kind, std::shared_ptr<const detail::WireTree> keep) {
    const auto header = detail::encode_frame({kind, send_sequence});
    const std::byte* data = keep ? keep->buffer->data() : nullptr;
    const std::size_t length = keep ? keep->message_bytes() : 0;
    link->post(header, data, length, std::move(keep), Clock::now() + options.timeout);
    ++send_sequence;
    last_sent = Clock::now();
  }

  void keep_alive_if_quiet() {
    if (Clock::now() - last_sent < options.timeout / 3) return;
    post_frame(detail::FrameKind::Keepalive, nullptr);
    ++stats.keepalives_sent;
  }

  // The layout goes first where the peer does not hold it: after a connect, or when it changed.
  void send_layout(const Schema& layout) {
    if (sent_schema && sent_fingerprint == layout.fingerprint()) return;
    const std::vector<std::byte> encoded = layout.encode();
    send_frame(detail::FrameKind::Schema, encoded.data(), encoded.size());
    sent_schema = true;
    sent_fingerprint = layout.fingerprint();
    ++stats.schemas_sent;
  }

  void send(const detail::Outgoing& out) {
    flush_posts(Clock::now() + options.timeout);
    const std::uint64_t total = out.schema->total_bytes();
    send_layout(*out.schema);
    detail::write_trailing_header({out.schema->fingerprint(), total, 0}, out.buffer, total);
    send_frame(detail::FrameKind::Data, out.buffer->data(), total + kWireHeaderBytes);
    ++stats.trees_sent;
  }

  void post(std::shared_ptr<const detail::WireTree> tree) {
    if (tree != last_posted) waiting = std::move(tree);
    progress_posts();
  }

  // Hands the waiting tree to the link once the one before it has gone (its layout, a small
  // message, is sent first when needed). True when nothing is left to send.
  bool progress_posts() {
    if (link->posted() > 0) return false;
    if (!waiting) return true;
    last_posted = std::move(waiting);
    send_layout(*last_posted->schema);
    post_frame(detail::FrameKind::Data, last_posted);
    ++stats.trees_sent;
    return link->posted() == 0;
  }

  // A failure of the link met while sending is thrown by receive() too, after the messages that
  // arrived before it: a receiver takes what its peer sent before going.
  void progress_posts_before_receiving() {
    if (link->failed()) return;
    try {
      progress_posts();
    } catch (const Error&) {
      if (!link->failed()) throw;
    }
  }

  bool flush_posts(Clock::time_point until) {
    while (!progress_posts()) {
      if (Clock::now() >= until) return false;
      std::this_thread::yield();
    }
    return true;
  }

  // The next tree that arrived by `until`; nullopt when none did. Timeout when the peer has been
  // silent for longer than the channel's timeout.
  std::optional<ArrivedTree> next_tree(Clock::time_point until) {
    for (;;) {
      progress_posts_before_receiving();
      const Clock::time_point silent_limit = last_heard + options.timeout;
      const Clock::time_point now = Clock::now();
      // A caller that came back after longer than the timeout first takes what arrived meanwhile:
      // the silence it measures is the peer's, not its own.
      const Clock::time_point wait_until = silent_limit > now ? std::min(until, silent_limit) : now + drain_time();
      std::optional<ucx::Arrival> arrival = link->receive(wait_until);
      if (!arrival) {
        if (Clock::now() < silent_limit) return std::nullopt;
        throw Timeout(fmt::format("tree channel: {} sent nothing for {} ms (the channel's timeout)", link_peer(),
                                  options.timeout.count()));
      }
      last_heard = Clock::now();
      const detail::Frame frame = detail::decode_frame(arrival->header, link_peer());
      switch (frame.kind) {
        case detail::FrameKind::Keepalive:
          ++stats.keepalives_received;
          break;
        case detail::FrameKind::Schema:
          take_schema(*arrival);
          break;
        case detail::FrameKind::Data:
          return take_tree(*arrival);
      }
    }
  }

  void take_schema(const ucx::Arrival& arrival) {
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

  ArrivedTree take_tree(const ucx::Arrival& arrival) {
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
  StoragePtr upload(const StoragePtr& staged, std::uint64_t total) {
    const Device device = Device::cuda(cuda::current_device());
    StoragePtr on_device = arrivals.take(total, device, [&] { return Storage::allocate(total, device); });
    detail::copy_bytes(on_device->data(), device, staged->data(), Device::cpu(), total);
    return on_device;
  }

  std::chrono::milliseconds drain_time() const {
    return std::min<std::chrono::milliseconds>(options.timeout / 4, std::chrono::seconds(1));
  }

  // The tree recv() returns for what arrived: its leaves view the arrived buffer.
  TensorTree tree_of(ArrivedTree arrived) {
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

  ArrivedTree wait_tree() {
    std::optional<ArrivedTree> tree = next_tree(Clock::time_point::max());
    return std::move(*tree);
  }
};

TreeChannel::TreeChannel(std::unique_ptr<State> state) : state_(std::move(state)) {}
TreeChannel::TreeChannel(TreeChannel&&) noexcept = default;
TreeChannel& TreeChannel::operator=(TreeChannel&&) noexcept = default;
TreeChannel::~TreeChannel() = default;

TreeChannel TreeChannel::connect(const std::string& address, const ChannelOptions& options) {
  auto state = std::make_unique<State>(options);
  const std::shared_ptr<ucx::Node> node = ucx::connecting_node();
  state->link = node->connect(address, state->placement(), Clock::now() + options.timeout);
  state->last_heard = Clock::now();
  return TreeChannel(std::move(state));
}

void TreeChannel::send(const TensorTree& tree) {
  state_->check_open();
  // A tree the channel cannot carry is the caller's mistake: NotSupported, and the channel stays open.
  const detail::Outgoing out = detail::pack_for_channel(tree, state_->outgoing, "TreeChannel::send");
  state_->guarded([&] { state_->send(out); });
}

void TreeChannel::post(const TensorTree& tree) {
  state_->check_open();
  std::shared_ptr<const detail::WireTree> packed = detail::pack_wire_tree(tree, state_->outgoing, "TreeChannel::post");
  state_->guarded([&] { state_->post(std::move(packed)); });
}

void detail::ChannelAccess::offer(TreeChannel& channel, std::shared_ptr<const WireTree> tree) {
  TreeChannel::State& state = *channel.state_;
  state.guarded([&] {
    if (tree) state.post(std::move(tree));
    state.keep_alive_if_quiet();
  });
}

bool TreeChannel::flush(std::chrono::milliseconds wait) {
  return state_->guarded([&] { return state_->flush_posts(Clock::now() + wait); });
}

void TreeChannel::keepalive() {
  state_->guarded([&] {
    state_->flush_posts(Clock::now() + state_->options.timeout);
    state_->send_frame(detail::FrameKind::Keepalive, nullptr, 0);
    ++state_->stats.keepalives_sent;
  });
}

TensorTree TreeChannel::recv() {
  return state_->guarded([&] { return state_->tree_of(state_->wait_tree()); });
}

std::optional<TensorTree> TreeChannel::try_recv(std::chrono::milliseconds wait) {
  return state_->guarded([&]() -> std::optional<TensorTree> {
    std::optional<ArrivedTree> arrived = state_->next_tree(Clock::now() + wait);
    if (!arrived) return std::nullopt;
    return state_->tree_of(std::move(*arrived));
  });
}

void TreeChannel::recv_into(TensorTree& tree) {
  state_->check_open();
  const std::shared_ptr<const Schema> mine = detail::layout_of(tree, Device::cpu()).schema;
  const ArrivedTree arrived = state_->guarded([&] { return state_->wait_tree(); });
  if (arrived.schema->fingerprint() != mine->fingerprint()) {
    // The channel knows the sender's layout, so the error names the key rather than two fingerprints.
    const std::string difference = detail::difference_text(*mine, *arrived.schema, "there");
    throw SchemaMismatch(fmt::format("TreeChannel::recv_into: the tree from {} (layout {:#018x}) differs from this "
                                     "tree (layout {:#018x}){}; this tree is unchanged, and the tree that came is "
                                     "dropped (recv() takes trees of any layout)",
                                     peer(), arrived.schema->fingerprint(), mine->fingerprint(),
                                     difference.empty() ? std::string() : " " + difference));
  }
  detail::take_payload(tree, *arrived.schema, arrived.buffer, 0);
}

bool TreeChannel::is_open() const { return state_ && state_->closed_why.empty() && !state_->link->failed(); }

void TreeChannel::close() {
  if (!state_ || !state_->closed_why.empty()) return;
  state_->closed_why = fmt::format("tree channel to {}: closed by this end", peer());
  state_->link.reset();
}

const std::string& TreeChannel::peer() const {
  static const std::string closed = "a closed channel's peer";
  return state_->link ? state_->link->peer() : closed;
}

ChannelStats TreeChannel::stats() const { return state_->stats; }

// ---- TreeListener ------------------------------------------------------------------------------

struct TreeListener::State {
  ChannelOptions options;
  std::shared_ptr<ucx::Node> node;
};

TreeListener::TreeListener(std::unique_ptr<State> state) : state_(std::move(state)) {}
TreeListener::TreeListener(TreeListener&&) noexcept = default;
TreeListener& TreeListener::operator=(TreeListener&&) noexcept = default;
TreeListener::~TreeListener() = default;

TreeListener TreeListener::bind(const std::string& address, const ChannelOptions& options) {
  return TreeListener(std::make_unique<State>(State{options, ucx::listening_node(address)}));
}

std::string TreeListener::address() const { return state_->node->address(); }

std::optional<TreeChannel> TreeListener::accept(std::chrono::milliseconds wait) {
  auto channel = std::make_unique<TreeChannel::State>(state_->options);
  channel->link = state_->node->accept(channel->placement(), Clock::now() + wait);
  if (!channel->link) return std::nullopt;
  channel->last_heard = Clock::now();
  return TreeChannel(std::move(channel));
}

}  // namespace tensortree
