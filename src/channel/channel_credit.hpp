// Credit: how a tree channel bounds what a receiver holds. The receiver grants a window (trees,
// and the message bytes of those trees) of what its peer may have sent and this end's caller not
// yet taken, and tells the sender, in credit frames, how many trees its caller has taken. A sender
// sends a tree only within the window it was given (one tree larger than the byte window only
// when nothing else is in flight); a peer that sends beyond it has broken the protocol, and its
// channel ends (CorruptData). Both sides count against what the receiver *reported*, so the
// check does not depend on how fast the receiver's caller takes trees.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "channel/channel_frame.hpp"

namespace tensortree::detail {

// The largest window a peer may grant: more would let it make this end keep an unbounded record.
inline constexpr std::uint64_t kMaxWindowTrees = std::uint64_t{1} << 20;

// The sending side: the window the peer granted and what of it is in flight.
class SendCredit {
 public:
  // Takes a credit frame from `peer`; CorruptData when it is not one a receiver can send (taken
  // going back or past what was sent, a window of no trees or over kMaxWindowTrees).
  void grant(const Credit& credit, const std::string& peer);
  // Whether a tree of `bytes` message bytes may go now.
  bool allows(std::uint64_t bytes) const;
  // Whether the peer's caller has taken everything sent (false before the first grant).
  bool idle() const { return known_ && in_flight_.empty(); }
  void sent(std::uint64_t bytes);
  std::size_t in_flight() const { return in_flight_.size(); }

 private:
  bool known_ = false;
  Credit window_;
  std::uint64_t sent_ = 0;
  std::deque<std::uint64_t> in_flight_;  // message bytes of each tree sent and not reported taken
  std::uint64_t in_flight_bytes_ = 0;
};

// The receiving side: the window this end grants, what arrived within it, and when to report.
class ReceiveCredit {
 public:
  ReceiveCredit(std::uint64_t window_trees, std::uint64_t window_bytes);
  // A tree of `bytes` message bytes is arriving from `peer`: CorruptData when beyond the window.
  void arrive(std::uint64_t bytes, const std::string& peer);
  // This end's caller took the oldest tree that arrived.
  void take();
  // Whether to send a credit frame now: half the window was taken since the last, or the caller
  // is about to wait (`idle`) and took anything since.
  bool report_due(bool idle) const;
  // The credit frame to send (the window, and every tree taken so far); counts it as reported.
  Credit report();
  // The credit to send first, before anything was taken.
  Credit initial() const { return {0, window_trees_, window_bytes_}; }

 private:
  std::uint64_t window_trees_;
  std::uint64_t window_bytes_;
  std::deque<std::uint64_t> unreported_;  // message bytes of each tree arrived, not reported taken
  std::uint64_t unreported_bytes_ = 0;
  std::uint64_t taken_ = 0;
  std::uint64_t reported_ = 0;
  std::uint64_t taken_bytes_since_report_ = 0;
};

}  // namespace tensortree::detail
