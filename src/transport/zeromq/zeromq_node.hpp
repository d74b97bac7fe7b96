// Nodes and links over ZeroMQ (transport/link's interface): a listening node is one ROUTER socket
// serving every peer from one thread; a connecting node gives each link a DEALER socket. With a
// credential, every connection is CURVE (authenticated and encrypted) and the listener's ZAP
// handler admits only peers holding the same credential, before any message of theirs is read;
// without one, only loopback addresses are allowed (an explicit opt-in). No header includes ZeroMQ.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "transport/link/message_link.hpp"
#include "tensortree/channel_credential.hpp"

namespace tensortree::zeromq {

struct NodeOptions {
  // The job's credential; none only with loopback_without_credential.
  std::optional<ChannelCredential> credential{};
  // Plain loopback connections (127.0.0.0/8, ::1) without a credential: for tests and one host.
  bool loopback_without_credential = false;
  // The largest message part a peer may send (header or payload); larger ends its connection
  // inside ZeroMQ before anything is allocated for it.
  std::uint64_t max_message_bytes = std::uint64_t{1} << 34;
  // Messages queued per connection each way before a sender waits (ZeroMQ's high-water marks).
  int queued_messages = 8;
  // A connection that completes no handshake in this time is closed; one whose peer's host stops
  // answering is closed by TCP keepalives that begin after it (in whole seconds, three tries).
  std::chrono::milliseconds timeout{5000};
};

// What a listening node has refused (for tests and reports): handshakes that failed
// authentication, and connections closed before their handshake completed.
struct RefusalCounts {
  std::uint64_t failed_authentication = 0;
  std::uint64_t failed_handshakes = 0;
};

// A node listening on `address` ("host:port", ":port", "0.0.0.0:port"; port 0 picks a free one).
// InvalidArgument "host:port is already in use", or for an address not on loopback when there is
// no credential.
std::shared_ptr<link::Node> listening_node(const std::string& address, const NodeOptions& options);
// A node that only connects.
std::shared_ptr<link::Node> connecting_node(const NodeOptions& options);
// The refusals of a node listening_node made (zero for any other node).
RefusalCounts refusals(const link::Node& node);

}  // namespace tensortree::zeromq
