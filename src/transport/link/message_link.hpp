// Messages between processes, whatever engine carries them (transport/ucx, transport/zeromq): a Node
// accepts or makes connections; a Link is one of them. A message is a small header plus one buffer
// of bytes; the receiver chooses where the bytes go from the header and length (Placement), so a
// hostile length is refused before the receiver allocates. One thread drives a node and its links.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/storage.hpp"

namespace tensortree::link {

using Clock = std::chrono::steady_clock;

// The largest header a message may carry.
inline constexpr std::size_t kMaxHeaderBytes = 64;

// Host memory of at least `length` bytes for the message that `header` announces from `peer`
// ("host:port"), or an exception: the message is then refused (its sender's send fails) and the
// link fails with that exception. Returns null for a message of no bytes.
using Placement =
    std::function<StoragePtr(const std::string& peer, std::span<const std::byte> header, std::size_t length)>;

struct Arrival {
  std::vector<std::byte> header;
  StoragePtr buffer;  // what the Placement gave; null when length is 0
  std::size_t length = 0;
};

class Link {
 public:
  virtual ~Link() = default;
  // Sends `header` and bytes [data, data + length) of host memory as one message; returns once the
  // bytes may be reused. PeerLost when the link has failed (or fails meanwhile); Timeout, which
  // also fails the link, when `deadline` passes first.
  virtual void send(std::span<const std::byte> header, const std::byte* data, std::size_t length,
                    Clock::time_point deadline) = 0;
  // Starts sending as send() does and returns at once. `keep` holds the bytes (and whatever else the
  // caller needs alive) until the message has gone; the header is copied. Messages go in the order
  // they were posted. The link fails with Timeout when one has not gone by `deadline`.
  virtual void post(std::span<const std::byte> header, const std::byte* data, std::size_t length,
                    std::shared_ptr<const void> keep, Clock::time_point deadline) = 0;
  // Progresses the node once without waiting (its other links and connections too) and returns
  // how many posted messages are still on their way; throws the link's failure (a posted message
  // that failed or outlived its deadline).
  virtual std::size_t posted() = 0;
  // The oldest message that arrived whole, progressing the node until one has; nullopt when
  // `deadline` passes first. Messages that arrived before the link failed are still returned;
  // then it throws the failure.
  virtual std::optional<Arrival> receive(Clock::time_point deadline) = 0;
  // Ends the link with `error` (what its calls throw from now on) and closes its endpoint at once.
  virtual void fail(std::exception_ptr error) = 0;
  virtual bool failed() const = 0;
  // Whether receive() would return or throw at once: a message has arrived whole, or the link failed.
  virtual bool readable() const = 0;
  // "host:port" of the other end.
  virtual const std::string& peer() const = 0;
};

class Node {
 public:
  virtual ~Node() = default;
  // The "host:port" peers connect to (a listening node); a wildcard bind reports this host's name.
  virtual std::string address() const = 0;
  // A link to the node listening at `address` ("host:port"), ready once the listener's owner has
  // accepted it; PeerLost when that node cannot be reached, Timeout past `deadline`.
  virtual std::unique_ptr<Link> connect(const std::string& address, Placement placement,
                                        Clock::time_point deadline) = 0;
  // The next connection a peer made to this listening node; null when `deadline` passes first.
  virtual std::unique_ptr<Link> accept(Placement placement, Clock::time_point deadline) = 0;
  // The links this node accepted that became readable (a message arrived, or the link failed)
  // since they were last listed, each once, oldest first, appended to `ready`: one wait for all of
  // a listener's links, at a cost that grows with what arrived, not with how many links there are.
  // Waits until `deadline` when none is; a node that cannot tell throws NotSupported.
  virtual void take_ready(std::vector<Link*>& /*ready*/, Clock::time_point /*deadline*/) {
    throw NotSupported("a connecting node has no readiness wait: its links are served one by one");
  }
};

}  // namespace tensortree::link
