// What the listener's and the connector's sockets share: their security and limits, the greeting
// a link begins with, one message (a header part and a payload part) in and out, and posted
// payloads that ZeroMQ sends from the caller's memory.
#pragma once

#include <atomic>
#include <deque>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "transport/link/message_link.hpp"
#include "transport/zeromq/zeromq_node.hpp"

namespace tensortree::zeromq {

// The first message of a link from its connector, and the listener's answer once accepted: a header
// part of this text and no payload. A peer that sends anything else first is not a link.
inline constexpr std::string_view kHello = "tensortree-link-hello-1";
inline constexpr std::string_view kWelcome = "tensortree-link-welcome-1";
// The listener's last word to a link it ended (a refused message, a channel it dropped): a ROUTER
// cannot close one peer's connection, so the peer is told, and its link fails with PeerLost.
inline constexpr std::string_view kFarewell = "tensortree-link-farewell-1";

// Limits, timeouts and (with a credential) CURVE on a socket, as server or client; linger 0.
void configure(zmq::socket_t& socket, const NodeOptions& options, bool server);

// A message as it arrived: its header part and its payload part (ZeroMQ's memory).
struct Parts {
  zmq::message_t header;
  zmq::message_t payload;
  bool has_payload = false;
};
// The header and payload parts following whatever the caller took first; CorruptData naming
// `peer` for more than two parts or a header larger than link::kMaxHeaderBytes.
Parts receive_parts(zmq::socket_t& socket, const std::string& peer);

// The payload into the buffer `placement` chooses (the placement may refuse, and throws then).
link::Arrival place(const Parts& parts, const link::Placement& placement, const std::string& peer);

// Posted payloads ZeroMQ still holds: each keeps the caller's `keep` until ZeroMQ lets go of its
// bytes (on its I/O thread, once written to the connection), in the order they were posted.
class InFlight {
 public:
  // A payload part over [data, data + length) that holds `keep` while ZeroMQ sends it; it should
  // be gone by `deadline`.
  zmq::message_t payload(const std::byte* data, std::size_t length, std::shared_ptr<const void> keep,
                         link::Clock::time_point deadline);
  // How many ZeroMQ still holds.
  std::size_t count();
  // The oldest still held has outlived its deadline.
  bool overdue(link::Clock::time_point now);

 private:
  struct Entry {
    link::Clock::time_point deadline;
    std::shared_ptr<std::atomic<bool>> released;
  };
  std::deque<Entry> entries_;
};

// ZeroMQ's failure as the library's: BackendError naming `what`.
[[noreturn]] void throw_engine_error(const zmq::error_t& error, std::string_view what);

}  // namespace tensortree::zeromq
