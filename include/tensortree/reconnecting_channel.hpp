// An actor's channel that outlives its learner. While the learner is there it is a TreeChannel;
// when the learner dies (or is not up yet), the actor goes on acting: send() keeps a bounded number
// of trees (the oldest dropped and counted beyond it), and the calls try to connect again, with a
// backoff doubling from first_retry to max_retry, to the same address with the same credential.
// Once a learner accepts, the channel's layout goes again, then the kept trees, oldest first, then
// what follows: no call throws for the learner's absence.
//
//   ReconnectingChannel learner(address);
//   for (;;) {
//     if (auto newest = learner.take_newest_weights()) weights = std::move(*newest);  // else the last
//     act(weights.params, trajectory);
//     learner.send(trajectory);
//   }
//
// Trees the old learner had received but not taken when it died died with it; what send() kept is
// what the channel had not handed over. A learner that refuses the credential is not a learner
// restarting: InvalidArgument, as TreeChannel::connect.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tensortree/channel_weights.hpp"
#include "tensortree/export.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/tree_channel.hpp"

namespace tensortree {

struct ReconnectOptions {
  // Each connection's options (credential, timeout, credit).
  ChannelOptions channel{};
  // Trees kept while no learner takes them; beyond it the oldest is dropped (stats().trees_dropped).
  std::size_t max_kept_trees = 64;
  // The wait before the first attempt after a loss, doubled after each failed one up to max_retry.
  std::chrono::milliseconds first_retry{50};
  std::chrono::milliseconds max_retry{500};
  // How long one attempt may wait for the learner to accept (less than channel.timeout: an actor
  // whose learner's host vanished keeps acting meanwhile).
  std::chrono::milliseconds connect_wait{1000};
};

struct ReconnectStats {
  std::uint64_t connections = 0;       // channels opened, the first included
  std::uint64_t losses = 0;            // channels that failed under this end
  std::uint64_t trees_sent = 0;        // handed to a channel whose send returned
  std::uint64_t trees_dropped = 0;     // kept, then dropped for newer ones
  std::uint64_t trees_kept = 0;        // kept now, waiting for a learner
};

class TT_API ReconnectingChannel {
 public:
  // Connects to the learner at `address` ("host:port") if it is there; otherwise starts without
  // a channel and tries as its calls go. InvalidArgument for a malformed address or a refused
  // credential.
  explicit ReconnectingChannel(std::string address, ReconnectOptions options = {});
  ReconnectingChannel(ReconnectingChannel&&) noexcept;
  ReconnectingChannel& operator=(ReconnectingChannel&&) noexcept;
  // Closes the channel in order (what it was sent reaches the learner); kept trees are dropped.
  ~ReconnectingChannel();

  // Sends `tree` (TreeChannel::send: waits for credit, at most the timeout) after the kept trees;
  // without a learner, keeps a copy of it. The tree may be changed again when send returns.
  void send(const TensorTree& tree);
  // The newest weight version that arrived (take_newest_weights), waiting at most `wait` while a
  // channel is open; nullopt when none came or there is no learner: act with the last one.
  std::optional<ChannelWeights> take_newest_weights(std::chrono::milliseconds wait = std::chrono::milliseconds{0});
  // Connects when an attempt is due and sends kept trees; true when a channel is open.
  bool progress();
  bool connected() const;
  ReconnectStats stats() const;
  const std::string& address() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tensortree
