// The listener's front door: a ZAP handler (ZeroMQ's authentication protocol, RFC 27) on a thread of
// its own that admits only CURVE clients whose public key is the job's, so a peer without the
// credential is refused inside the handshake, before any message of it reaches the node.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace tensortree::zeromq {

class ZapHandler {
 public:
  // Binds ZeroMQ's ZAP endpoint in `context` (one handler per context) and starts answering.
  ZapHandler(zmq::context_t& context, const std::string& admitted_public_z85);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Requests refused so far.
  std::uint64_t refused() const { return refused_.load(); }

 private:
  void serve();
  void answer();

  zmq::socket_t socket_;
  std::string admitted_;  // the job's public key, 32 bytes
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace tensortree::zeromq
