// The listening node: one ROUTER socket serves every peer from the thread that drives it. Each
// message arrives as [routing id][header][payload]; a routing id is a link once its peer has sent
// the greeting and the node's owner has accepted it. ZeroMQ's socket monitor tells which connection
// closed (by descriptor, matched to the routing id its messages came with).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "transport/zeromq/zeromq_address.hpp"
#include "transport/zeromq/zeromq_auth.hpp"
#include "transport/zeromq/zeromq_events.hpp"
#include "transport/zeromq/zeromq_message.hpp"
#include "transport/zeromq/zeromq_node.hpp"

namespace tensortree::zeromq {

namespace {

using link::Clock;

// One peer of the ROUTER, as the node and its link both see it.
struct Peer : std::enable_shared_from_this<Peer> {
  std::string id;      // ZeroMQ's routing id
  std::string name;    // "10.0.0.2 (connection 7)": its address, for errors
  int descriptor = -1;  // the connection's, for the monitor's disconnect events
  link::Placement placement;
  std::deque<link::Arrival> arrivals;
  std::exception_ptr failure;
  bool accepted = false;
  bool connected = true;  // until the monitor says its connection closed
  link::Link* link = nullptr;  // its link while one exists
  bool listed_ready = false;   // in the node's ready list
};

class ListeningNode;

class RouterLink final : public link::Link {
 public:
  RouterLink(std::shared_ptr<ListeningNode> node, std::shared_ptr<Peer> peer)
      : node_(std::move(node)), peer_(std::move(peer)) {
    peer_->link = this;
  }
  ~RouterLink() override;

  void send(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            Clock::time_point deadline) override;
  void post(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            std::shared_ptr<const void> keep, Clock::time_point deadline) override;
  std::size_t posted() override;
  std::optional<link::Arrival> receive(Clock::time_point deadline) override;
  void fail(std::exception_ptr error) override;
  bool failed() const override { return peer_->failure != nullptr; }
  bool readable() const override { return !peer_->arrivals.empty() || failed(); }
  const std::string& peer() const override { return peer_->name; }

 private:
  void throw_if_failed() const {
    if (peer_->failure) std::rethrow_exception(peer_->failure);
  }
  // Hands waiting posts to ZeroMQ while their peer's queue has room; fails the link for one past
  // its deadline.
  void push_posts();

  struct Post {
    std::vector<std::byte> header;
    zmq::message_t payload;
    bool has_payload = false;
    Clock::time_point deadline;
  };
  std::shared_ptr<ListeningNode> node_;
  std::shared_ptr<Peer> peer_;
  std::deque<Post> waiting_;
  InFlight in_flight_;
};

class ListeningNode final : public link::Node, public std::enable_shared_from_this<ListeningNode> {
 public:
  ListeningNode(const std::string& address, const NodeOptions& options)
      : options_(options), router_(context_, zmq::socket_type::router) {
    const Endpoint endpoint = parse_endpoint(address, "channel listener");
    if (!options.credential && !(options.loopback_without_credential && endpoint.loopback())) {
      throw InvalidArgument(fmt::format(
          "channel listener: {} needs the job's credential (only loopback may go without, by its named opt-in)",
          address));
    }
    if (options.credential) zap_.emplace(context_, options.credential->public_text());
    configure(router_, options, /*server=*/true);
    router_.set(zmq::sockopt::router_mandatory, 1);
    // A peer's last messages stay readable after its connection closes only while the socket
    // lingers: ZeroMQ drops a closed connection's unread messages at once with a linger of 0. The
    // socket itself closes with 0 (the destructor): a learner going away waits for nobody.
    router_.set(zmq::sockopt::linger, static_cast<int>(options.timeout.count()));
    events_.emplace(context_, router_);
    try {
      router_.bind(endpoint.tcp());
    } catch (const zmq::error_t& error) {
      if (error.num() == EADDRINUSE) throw InvalidArgument(fmt::format("{} is already in use", endpoint.text()));
      throw InvalidArgument(fmt::format("cannot listen on {} ({})", endpoint.text(), error.what()));
    }
    address_ = reported_address(endpoint, router_.get(zmq::sockopt::last_endpoint));
  }
  ~ListeningNode() override {
    router_.set(zmq::sockopt::linger, 0);
    // The socket goes before its ZAP handler: a peer's reconnection that arrives while the learner
    // goes away must find the socket closed (its connection ends), never a socket whose handler
    // has gone (its handshake fails, and the actor reads that its credential was refused).
    events_.reset();
    router_.close();
    zap_.reset();
  }

  std::string address() const override { return address_; }

  std::unique_ptr<link::Link> connect(const std::string&, link::Placement, Clock::time_point) override {
    throw InvalidArgument("a listening node accepts links; connect from a connecting node");
  }

  std::unique_ptr<link::Link> accept(link::Placement placement, Clock::time_point deadline) override {
    for (;;) {
      while (!greeted_.empty()) {
        std::shared_ptr<Peer> peer = greeted_.front();
        greeted_.pop_front();
        if (peer->failure) continue;
        peer->placement = std::move(placement);
        peer->accepted = true;
        send_parts(*peer, kWelcome, nullptr, deadline);
        return std::make_unique<RouterLink>(shared_from_this(), std::move(peer));
      }
      if (!progress(deadline)) return nullptr;
    }
  }

  void take_ready(std::vector<link::Link*>& ready, Clock::time_point deadline) override {
    if (ready_.empty()) progress(deadline);
    for (const std::shared_ptr<Peer>& peer : ready_) {
      peer->listed_ready = false;
      if (peer->link != nullptr) ready.push_back(peer->link);
    }
    ready_.clear();
  }

  // Reads what arrived (and connection events), waiting until `until` for something; false when
  // nothing came.
  bool progress(Clock::time_point until) {
    // Without a wait, the socket is read directly, and at most every kRereadAfter: each read takes
    // every peer's messages, and costs system calls (ZeroMQ polls its mailbox and checks its pid),
    // so a learner calling try_recv(0) on each of its channels in turn reads the socket about once
    // a turn, not once a channel. zmq_poll is for waiting.
    const Clock::time_point now = Clock::now();
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
    if (wait.count() <= 0 && now - last_read_ < kRereadAfter) return false;
    last_read_ = now;
    if (wait.count() > 0) {
      std::array<zmq::pollitem_t, 2> items{{{router_.handle(), 0, ZMQ_POLLIN, 0},
                                            {events_->socket().handle(), 0, ZMQ_POLLIN, 0}}};
      if (zmq::poll(items.data(), items.size(), wait) == 0) return false;
    }
    bool read = false;
    while (read_one_message()) read = true;
    take_events();
    // A connection's last messages reach the socket just after the event saying it closed: they
    // are read before its link fails, so that a peer's last words (its close) are never lost.
    if (!lost_.empty()) {
      while (read_one_message()) {
      }
      for (const std::shared_ptr<Peer>& peer : lost_) {
        fail_peer(*peer, std::make_exception_ptr(PeerLost(fmt::format("the connection to {} broke", peer->name))));
      }
      lost_.clear();
    }
    return read || wait.count() > 0;
  }

  // [routing id][header][payload] to `peer`, waiting while its queue is full (ROUTER_MANDATORY
  // says so at the first part); Timeout past `deadline`.
  void send_parts(Peer& peer, std::string_view header, zmq::message_t* payload, Clock::time_point deadline) {
    while (!try_send(peer, zmq::buffer(header), payload)) {
      if (Clock::now() >= deadline) {
        throw Timeout(fmt::format("channel link: {} took nothing for {} ms", peer.name, options_.timeout.count()));
      }
      progress(std::min(deadline, Clock::now() + std::chrono::milliseconds(1)));
    }
  }

  // Sends unless the peer's queue is full (false then: nothing was sent).
  bool try_send(Peer& peer, zmq::const_buffer header, zmq::message_t* payload) {
    try {
      if (!router_.send(zmq::buffer(peer.id), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    } catch (const zmq::error_t& error) {
      if (error.num() != EHOSTUNREACH) throw_engine_error(error, "channel link send");
      // The connection is gone and what was sent goes nowhere; the link fails once the messages
      // its peer sent before going are read (progress), as for a closed connection.
      lose(peer);
      return true;
    }
    (void)router_.send(header, payload ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload) (void)router_.send(*payload, zmq::send_flags::none);
    return true;
  }

  // Ends `peer`'s link with `error` and tells the peer (best effort, never waiting).
  void fail_peer(Peer& peer, std::exception_ptr error) {
    if (peer.failure) return;
    peer.failure = std::move(error);
    list_ready(peer);
    if (!peer.accepted || !peer.connected) return;
    try {
      (void)try_send(peer, zmq::buffer(kFarewell), nullptr);
    } catch (const Error&) {
    }
  }

  void forget(Peer& peer) {
    fail_peer(peer, std::make_exception_ptr(PeerLost(fmt::format("the link to {} was dropped", peer.name))));
    peers_.erase(peer.id);
    if (peer.descriptor >= 0) by_descriptor_.erase(peer.descriptor);
  }

  RefusalCounts refusal_counts() const {
    RefusalCounts counts = refusals_;
    if (zap_) counts.failed_authentication = std::max(counts.failed_authentication, zap_->refused());
    return counts;
  }

 private:
  bool read_one_message() {
    zmq::message_t id;
    if (!router_.recv(id, zmq::recv_flags::dontwait)) return false;
    const auto found = peers_.find(id.to_string());
    std::shared_ptr<Peer> peer = found != peers_.end() ? found->second : nullptr;
    try {
      Parts parts = receive_parts(router_, peer ? peer->name : "a peer");
      if (!peer) {
        greet(id, parts);
      } else if (!peer->failure && peer->accepted) {
        peer->arrivals.push_back(place(parts, peer->placement, peer->name));
        list_ready(*peer);
      }
    } catch (...) {
      if (peer) fail_peer(*peer, std::current_exception());
    }
    return true;
  }

  // A new routing id: a link once it greets; anything else from it is dropped unanswered.
  void greet(const zmq::message_t& id, Parts& parts) {
    if (parts.has_payload || parts.header.to_string_view() != kHello) {
      ++refusals_.failed_handshakes;
      return;
    }
    // The connection's descriptor and address come with the parts its engine read, not with the
    // routing id the ROUTER adds.
    const int descriptor = connection_descriptor(parts.header);
    // Events of an earlier connection that had the same descriptor (its close) were sent before
    // this one's first message, but may not have been read yet: they go first, so that they are
    // not taken for this connection's.
    take_events();
    auto peer = std::make_shared<Peer>();
    peer->id = id.to_string();
    peer->name = describe(parts.header, descriptor);
    peer->descriptor = descriptor;
    peers_[peer->id] = peer;
    if (descriptor >= 0) by_descriptor_[descriptor] = peer->id;
    greeted_.push_back(std::move(peer));
  }

  // An accepted peer's link has something to read: take_ready lists it (once until then).
  void list_ready(Peer& peer) {
    if (!peer.accepted || peer.listed_ready) return;
    peer.listed_ready = true;
    ready_.push_back(peer.shared_from_this());
  }

  void take_events() {
    while (std::optional<SocketEvent> event = events_->next()) take_event(*event);
  }

  void take_event(const SocketEvent& event) {
    switch (event.kind) {
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: ++refusals_.failed_authentication; break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: ++refusals_.failed_handshakes; break;
      case ZMQ_EVENT_DISCONNECTED: disconnected(static_cast<int>(event.value)); break;
      default: break;
    }
  }

  void disconnected(int descriptor) {
    const auto found = by_descriptor_.find(descriptor);
    if (found == by_descriptor_.end()) return;
    const auto peer = peers_.find(found->second);
    by_descriptor_.erase(found);
    if (peer == peers_.end()) return;
    lose(*peer->second);
  }

  // progress() fails the peer's link once its last messages are read.
  void lose(Peer& peer) {
    if (!peer.connected) return;
    peer.connected = false;
    peer.descriptor = -1;
    const auto found = peers_.find(peer.id);
    if (found != peers_.end()) lost_.push_back(found->second);
  }

  static int connection_descriptor(zmq::message_t& message) {
    const int descriptor = zmq_msg_get(message.handle(), ZMQ_SRCFD);
    return descriptor >= 0 ? descriptor : -1;
  }

  // "10.0.0.2:41822": the connection's far end, as the UCX engine named its peers; ZeroMQ's
  // Peer-Address (no port) where the descriptor is not known.
  static std::string describe(zmq::message_t& message, int descriptor) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    std::array<char, INET6_ADDRSTRLEN> host{};
    if (descriptor >= 0 && ::getpeername(descriptor, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      if (address.ss_family == AF_INET) {
        const auto& ip4 = reinterpret_cast<const sockaddr_in&>(address);
        ::inet_ntop(AF_INET, &ip4.sin_addr, host.data(), host.size());
        return fmt::format("{}:{}", host.data(), ntohs(ip4.sin_port));
      }
      if (address.ss_family == AF_INET6) {
        const auto& ip6 = reinterpret_cast<const sockaddr_in6&>(address);
        ::inet_ntop(AF_INET6, &ip6.sin6_addr, host.data(), host.size());
        return fmt::format("[{}]:{}", host.data(), ntohs(ip6.sin6_port));
      }
    }
    const char* peer_address = nullptr;
    try {
      peer_address = message.gets("Peer-Address");
    } catch (const zmq::error_t&) {
    }
    return peer_address != nullptr ? peer_address : "a peer";
  }

  NodeOptions options_;
  zmq::context_t context_;
  std::optional<ZapHandler> zap_;
  zmq::socket_t router_;
  std::optional<EventStream> events_;
  std::string address_;
  std::map<std::string, std::shared_ptr<Peer>> peers_;  // by routing id
  std::map<int, std::string> by_descriptor_;
  std::deque<std::shared_ptr<Peer>> greeted_;  // waiting for accept()
  std::vector<std::shared_ptr<Peer>> lost_;     // connections closed, links not yet failed
  std::vector<std::shared_ptr<Peer>> ready_;    // accepted peers with something to read, oldest first
  static constexpr auto kRereadAfter = std::chrono::microseconds(20);
  Clock::time_point last_read_{};
  RefusalCounts refusals_;
};

RouterLink::~RouterLink() {
  peer_->link = nullptr;
  node_->forget(*peer_);
}

void RouterLink::fail(std::exception_ptr error) { node_->fail_peer(*peer_, std::move(error)); }

void RouterLink::send(std::span<const std::byte> header, const std::byte* data, std::size_t length,
                      Clock::time_point deadline) {
  throw_if_failed();
  std::optional<zmq::message_t> payload;
  if (length > 0) payload.emplace(data, length);  // a copy: the caller reuses its bytes at once
  node_->send_parts(*peer_, {reinterpret_cast<const char*>(header.data()), header.size()},
                    payload ? &*payload : nullptr, deadline);
}

void RouterLink::post(std::span<const std::byte> header, const std::byte* data, std::size_t length,
                      std::shared_ptr<const void> keep, Clock::time_point deadline) {
  throw_if_failed();
  Post post{{header.begin(), header.end()}, {}, length > 0, deadline};
  if (length > 0) post.payload = in_flight_.payload(data, length, std::move(keep), deadline);
  waiting_.push_back(std::move(post));
  push_posts();
}

void RouterLink::push_posts() {
  while (!waiting_.empty()) {
    Post& next = waiting_.front();
    const zmq::const_buffer header(next.header.data(), next.header.size());
    if (!node_->try_send(*peer_, header, next.has_payload ? &next.payload : nullptr)) {
      if (Clock::now() < next.deadline) return;
      throw Timeout(fmt::format("channel link: {} took nothing before the deadline", peer_->name));
    }
    waiting_.pop_front();
  }
}

std::size_t RouterLink::posted() {
  throw_if_failed();
  node_->progress(Clock::now());
  push_posts();
  throw_if_failed();
  if (in_flight_.overdue(Clock::now())) {
    fail(std::make_exception_ptr(Timeout(fmt::format("channel link: {} took nothing before the deadline", peer_->name))));
  }
  throw_if_failed();
  return waiting_.size() + in_flight_.count();
}

std::optional<link::Arrival> RouterLink::receive(Clock::time_point deadline) {
  for (;;) {
    if (!peer_->arrivals.empty()) {
      link::Arrival arrival = std::move(peer_->arrivals.front());
      peer_->arrivals.pop_front();
      return arrival;
    }
    throw_if_failed();
    if (!node_->progress(deadline) && Clock::now() >= deadline) return std::nullopt;
  }
}

}  // namespace

std::shared_ptr<link::Node> listening_node(const std::string& address, const NodeOptions& options) {
  return std::make_shared<ListeningNode>(address, options);
}

RefusalCounts refusals(const link::Node& node) {
  const auto* listening = dynamic_cast<const ListeningNode*>(&node);
  return listening != nullptr ? listening->refusal_counts() : RefusalCounts{};
}

}  // namespace tensortree::zeromq
