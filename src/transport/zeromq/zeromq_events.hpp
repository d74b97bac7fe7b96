// A socket's connection events (ZeroMQ's socket monitor), read without waiting: connected,
// refused, disconnected (with the connection's descriptor), and handshakes that failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <zmq.hpp>

namespace tensortree::zeromq {

struct SocketEvent {
  std::uint16_t kind = 0;  // ZMQ_EVENT_*
  std::uint32_t value = 0;  // the descriptor, an errno or a protocol code, by kind
};

class EventStream {
 public:
  // Monitors `socket` (created in `context`) for every event.
  EventStream(zmq::context_t& context, zmq::socket_t& socket);
  // The next event that happened, or nullopt.
  std::optional<SocketEvent> next();
  zmq::socket_t& socket() { return pair_; }

 private:
  zmq::socket_t pair_;
};

}  // namespace tensortree::zeromq
