// The connecting node: each link is a DEALER socket of the node's context, connected to one
// listener, greeting it and waiting for its welcome (the listener's owner accepted the link).
// The socket monitor says why a connection does not come up: nothing listens, or the listener
// refused this process's credential.
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "transport/zeromq/zeromq_address.hpp"
#include "transport/zeromq/zeromq_events.hpp"
#include "transport/zeromq/zeromq_message.hpp"
#include "transport/zeromq/zeromq_node.hpp"

namespace tensortree::zeromq {

namespace {

using link::Clock;

class DealerLink final : public link::Link {
 public:
  DealerLink(std::shared_ptr<zmq::context_t> context, const NodeOptions& options, const std::string& address,
             link::Placement placement)
      : context_(std::move(context)),
        dealer_(*context_, zmq::socket_type::dealer),
        placement_(std::move(placement)),
        linger_(options.timeout) {
    const Endpoint endpoint = parse_endpoint(address, "channel connect");
    peer_ = endpoint.text();
    if (!options.credential && !(options.loopback_without_credential && endpoint.loopback())) {
      throw InvalidArgument(fmt::format(
          "channel connect: {} needs the job's credential (only loopback may go without, by its named opt-in)",
          address));
    }
    configure(dealer_, options, /*server=*/false);
    events_.emplace(*context_, dealer_);
    dealer_.connect(endpoint.tcp());
  }

  // What was sent before the link goes is still delivered, for at most the timeout: the context
  // that goes with the link waits for it.
  ~DealerLink() override {
    if (failure_) return;
    try {
      dealer_.set(zmq::sockopt::linger, static_cast<int>(linger_.count()));
    } catch (const zmq::error_t&) {
    }
  }

  // Greets the listener and waits for its welcome.
  void open(Clock::time_point deadline) {
    (void)dealer_.send(zmq::buffer(kHello), zmq::send_flags::dontwait);
    for (;;) {
      if (std::optional<Parts> parts = next_parts(deadline)) {
        if (parts->has_payload || parts->header.to_string_view() != kWelcome) {
          throw CorruptData(fmt::format("channel connect: {} answered with something other than a welcome", peer_));
        }
        return;
      }
      if (Clock::now() >= deadline) {
        throw Timeout(fmt::format("connect: {} did not accept the connection in time", peer_));
      }
    }
  }

  void send(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            Clock::time_point deadline) override {
    throw_if_failed();
    std::optional<zmq::message_t> payload;
    if (length > 0) payload.emplace(data, length);  // a copy: the caller reuses its bytes at once
    while (!try_send({header.data(), header.size()}, payload ? &*payload : nullptr)) {
      if (Clock::now() >= deadline) throw Timeout(fmt::format("channel link: {} took nothing in time", peer_));
      wait_events(std::min(deadline, Clock::now() + std::chrono::milliseconds(1)));
      throw_if_failed();
    }
  }

  void post(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            std::shared_ptr<const void> keep, Clock::time_point deadline) override {
    throw_if_failed();
    Post post{{header.begin(), header.end()}, {}, length > 0, deadline};
    if (length > 0) post.payload = in_flight_.payload(data, length, std::move(keep), deadline);
    waiting_.push_back(std::move(post));
    push_posts();
  }

  std::size_t posted() override {
    throw_if_failed();
    take_events();
    push_posts();
    throw_if_failed();
    if (in_flight_.overdue(Clock::now())) {
      fail(std::make_exception_ptr(Timeout(fmt::format("channel link: {} took nothing before the deadline", peer_))));
    }
    throw_if_failed();
    return waiting_.size() + in_flight_.count();
  }

  std::optional<link::Arrival> receive(Clock::time_point deadline) override {
    if (!arrivals_.empty()) return pop_arrival();
    throw_if_failed();
    std::optional<Parts> parts = next_parts(deadline);
    if (!parts) return std::nullopt;
    if (!parts->has_payload && parts->header.to_string_view() == kFarewell) {
      fail_with(PeerLost(fmt::format("the listener at {} ended this link", peer_)));
      throw_if_failed();
    }
    try {
      arrivals_.push_back(place(*parts, placement_, peer_));
    } catch (...) {
      fail(std::current_exception());
      throw;
    }
    return pop_arrival();
  }

  void fail(std::exception_ptr error) override {
    if (!failure_) failure_ = std::move(error);
  }
  bool failed() const override { return failure_ != nullptr; }
  bool readable() const override { return !arrivals_.empty() || failed(); }
  const std::string& peer() const override { return peer_; }

 private:
  struct Post {
    std::vector<std::byte> header;
    zmq::message_t payload;
    bool has_payload = false;
    Clock::time_point deadline;
  };

  void throw_if_failed() const {
    if (failure_) std::rethrow_exception(failure_);
  }

  link::Arrival pop_arrival() {
    link::Arrival arrival = std::move(arrivals_.front());
    arrivals_.pop_front();
    return arrival;
  }

  bool try_send(std::span<const std::byte> header, zmq::message_t* payload) {
    const zmq::const_buffer head(header.data(), header.size());
    const auto flags = zmq::send_flags::dontwait | (payload ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (!dealer_.send(head, flags)) return false;
    if (payload) (void)dealer_.send(*payload, zmq::send_flags::none);
    return true;
  }

  void push_posts() {
    while (!waiting_.empty()) {
      Post& next = waiting_.front();
      if (!try_send(next.header, next.has_payload ? &next.payload : nullptr)) {
        if (Clock::now() < next.deadline) return;
        throw Timeout(fmt::format("channel link: {} took nothing before the deadline", peer_));
      }
      waiting_.pop_front();
    }
  }

  // The next message from the listener by `deadline`, reading connection events meanwhile (which
  // fail the link: nothing listens, a refused credential, a closed connection).
  std::optional<Parts> next_parts(Clock::time_point deadline) {
    for (;;) {
      zmq::message_t first;
      take_events();
      throw_if_failed();
      if (dealer_.get(zmq::sockopt::events) & ZMQ_POLLIN) return receive_parts(dealer_, peer_);
      if (Clock::now() >= deadline) return std::nullopt;
      wait_events(deadline);
    }
  }

  void wait_events(Clock::time_point until) {
    std::array<zmq::pollitem_t, 2> items{{{dealer_.handle(), 0, ZMQ_POLLIN, 0},
                                          {events_->socket().handle(), 0, ZMQ_POLLIN, 0}}};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    (void)zmq::poll(items.data(), items.size(), std::max(wait, std::chrono::milliseconds(0)));
  }

  void take_events() {
    while (std::optional<SocketEvent> event = events_->next()) {
      switch (event->kind) {
        case ZMQ_EVENT_CONNECTED: connected_ = true; break;
        case ZMQ_EVENT_CONNECT_RETRIED:
          if (!connected_) fail_with(PeerLost(fmt::format("nothing listens at {} (is the learner up?)", peer_)));
          break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
          fail_with(InvalidArgument(fmt::format(
              "the listener at {} refused this process's credential (is {} the learner's key?)", peer_,
              kChannelKeyVariable)));
          break;
        case ZMQ_EVENT_DISCONNECTED:
          if (connected_) fail_with(PeerLost(fmt::format("the connection to {} broke", peer_)));
          break;
        default: break;
      }
    }
  }

  template <class Error>
  void fail_with(const Error& error) {
    fail(std::make_exception_ptr(error));
  }

  std::shared_ptr<zmq::context_t> context_;  // outlives the sockets below
  zmq::socket_t dealer_;
  std::optional<EventStream> events_;
  link::Placement placement_;
  std::chrono::milliseconds linger_;
  std::string peer_;
  bool connected_ = false;
  std::exception_ptr failure_;
  std::deque<link::Arrival> arrivals_;
  std::deque<Post> waiting_;
  InFlight in_flight_;
};

class ConnectingNode final : public link::Node {
 public:
  explicit ConnectingNode(const NodeOptions& options)
      : options_(options), context_(std::make_shared<zmq::context_t>()) {}

  std::string address() const override { return ""; }

  std::unique_ptr<link::Link> connect(const std::string& address, link::Placement placement,
                                      Clock::time_point deadline) override {
    auto dealer = std::make_unique<DealerLink>(context_, options_, address, std::move(placement));
    dealer->open(deadline);
    return dealer;
  }

  std::unique_ptr<link::Link> accept(link::Placement, Clock::time_point) override {
    throw InvalidArgument("a connecting node makes links; accept on a listening node");
  }

 private:
  NodeOptions options_;
  std::shared_ptr<zmq::context_t> context_;
};

}  // namespace

std::shared_ptr<link::Node> connecting_node(const NodeOptions& options) {
  return std::make_shared<ConnectingNode>(options);
}

}  // namespace tensortree::zeromq
