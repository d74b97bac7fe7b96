#include "transport/zeromq/zeromq_events.hpp"

#include <atomic>
#include <cstring>

#include "core/text_format.hpp"

namespace tensortree::zeromq {

namespace {

std::string unique_monitor_endpoint() {
  static std::atomic<std::uint64_t> next{0};
  return fmt::format("inproc://tensortree-monitor-{}", next++);
}

}  // namespace

EventStream::EventStream(zmq::context_t& context, zmq::socket_t& socket) : pair_(context, zmq::socket_type::pair) {
  const std::string endpoint = unique_monitor_endpoint();
  if (zmq_socket_monitor(socket.handle(), endpoint.c_str(), ZMQ_EVENT_ALL) != 0) throw zmq::error_t();
  pair_.set(zmq::sockopt::linger, 0);
  pair_.connect(endpoint);
}

// An event is two parts: 6 bytes (the kind, u16, then the value, u32, in host order) and the
// endpoint's address.
std::optional<SocketEvent> EventStream::next() {
  zmq::message_t first;
  if (!pair_.recv(first, zmq::recv_flags::dontwait)) return std::nullopt;
  SocketEvent event;
  if (first.size() >= 6) {
    std::memcpy(&event.kind, first.data(), sizeof event.kind);
    std::memcpy(&event.value, static_cast<const char*>(first.data()) + 2, sizeof event.value);
  }
  while (first.more()) {
    zmq::message_t rest;
    if (!pair_.recv(rest, zmq::recv_flags::none) || !rest.more()) break;
  }
  return event;
}

}  // namespace tensortree::zeromq
