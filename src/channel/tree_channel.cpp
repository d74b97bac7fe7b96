// TreeChannel and TreeListener over the links of transport/zeromq: the engine's options from the
// channel's, and the public calls over the channel's state (channel_state.hpp).
#include "tensortree/tree_channel.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <utility>

#include "channel/channel_access.hpp"
#include "channel/channel_state.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/transfer.hpp"
#include "transport/zeromq/zeromq_node.hpp"
#include "tree/layout_difference.hpp"
#include "wire/wire_pack.hpp"

namespace tensortree {

namespace {

using detail::Clock;

// The engine's options for a channel's: its credential (from TENSORTREE_CHANNEL_KEY when the
// options name none and plain loopback was not asked for), and the largest message it may take.
zeromq::NodeOptions node_options(const ChannelOptions& options) {
  zeromq::NodeOptions node{.credential = options.credential,
                           .loopback_without_credential = options.plain_loopback,
                           .max_message_bytes = std::max(options.max_tree_bytes + kWireHeaderBytes, options.max_schema_bytes),
                           // Credit bounds what is queued; the engine's marks only catch a peer that ignores it.
                           .queued_messages = static_cast<int>(std::min<std::uint64_t>(2 * options.max_trees_in_flight + 64, 1 << 20)),
                           .timeout = options.timeout};
  if (!node.credential && !options.plain_loopback) {
    if (std::getenv(kChannelKeyVariable) == nullptr) {
      throw InvalidArgument(fmt::format("tree channel: no credential: set {} to the learner's key, or "
                                        "ChannelOptions::credential (plain_loopback for 127.0.0.1 without one)",
                                        kChannelKeyVariable));
    }
    node.credential = ChannelCredential::from_environment();
  }
  return node;
}

}  // namespace

TreeChannel::State::State(const ChannelOptions& opts)
    : options(opts), receive_credit(opts.max_trees_in_flight, opts.max_bytes_in_flight) {}

TreeChannel::State::~State() {
  close_link(Clock::now() + options.timeout);
  link.reset();
}

void TreeChannel::State::check_open() const {
  if (!closed_why.empty()) throw ChannelClosed(closed_why);
}

void TreeChannel::State::throw_if_peer_closed() const {
  if (peer_closed) throw ChannelClosed(fmt::format("tree channel: {} closed the channel", link_peer()));
}

void TreeChannel::State::open() {
  last_heard = Clock::now();
  guarded([&] { post_credit(receive_credit.initial()); });
}

TreeChannel::TreeChannel(std::unique_ptr<State> state) : state_(std::move(state)) {}
TreeChannel::TreeChannel(TreeChannel&&) noexcept = default;
TreeChannel& TreeChannel::operator=(TreeChannel&&) noexcept = default;
TreeChannel::~TreeChannel() = default;

TreeChannel TreeChannel::connect(const std::string& address, const ChannelOptions& options) {
  return detail::ChannelAccess::connect(address, options, Clock::now() + options.timeout);
}

TreeChannel detail::ChannelAccess::connect(const std::string& address, const ChannelOptions& options,
                                           Clock::time_point deadline) {
  auto state = std::make_unique<TreeChannel::State>(options);
  const std::shared_ptr<link::Node> node = zeromq::connecting_node(node_options(options));
  state->link = node->connect(address, state->placement(), deadline);
  state->open();
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
  state.check_open();
  if (state.link->failed() || state.peer_closed) return;
  try {
    if (tree) state.post(std::move(tree));
    state.keep_alive_if_quiet();
  } catch (const Error&) {
    // The channel's failure is its receiver's to report, after the trees that came before it: a
    // learner that offers first and then receives loses none of them.
    state.link->fail(std::current_exception());
  }
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
    std::optional<detail::ArrivedTree> arrived = state_->next_tree(Clock::now() + wait);
    if (!arrived) return std::nullopt;
    return state_->tree_of(std::move(*arrived));
  });
}

void TreeChannel::recv_into(TensorTree& tree) {
  state_->check_open();
  const std::shared_ptr<const Schema> mine = detail::layout_of(tree, Device::cpu()).schema;
  const detail::ArrivedTree arrived = state_->guarded([&] { return state_->wait_tree(); });
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
  state_->close_link(Clock::now() + state_->options.timeout);
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
  std::shared_ptr<link::Node> node;
};

TreeListener::TreeListener(std::unique_ptr<State> state) : state_(std::move(state)) {}
TreeListener::TreeListener(TreeListener&&) noexcept = default;
TreeListener& TreeListener::operator=(TreeListener&&) noexcept = default;
TreeListener::~TreeListener() = default;

TreeListener TreeListener::bind(const std::string& address, const ChannelOptions& options) {
  return TreeListener(std::make_unique<State>(State{options, zeromq::listening_node(address, node_options(options))}));
}

std::string TreeListener::address() const { return state_->node->address(); }

std::optional<TreeChannel> TreeListener::accept(std::chrono::milliseconds wait) {
  auto channel = std::make_unique<TreeChannel::State>(state_->options);
  channel->link = state_->node->accept(channel->placement(), Clock::now() + wait);
  if (!channel->link) return std::nullopt;
  channel->node = state_->node;
  channel->open();
  return TreeChannel(std::move(channel));
}

}  // namespace tensortree
