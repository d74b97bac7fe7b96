// Weights to whoever is connected: the learner publishes versions of a parameter tree to the actors
// that reach it over tree channels, on any node, as WeightPublisher does for the actors of its own.
//
//   learner:  ChannelWeightPublisher weights;
//             weights.publish(params);                        // version 1, 2, ... (one copy)
//             weights.offer_to(actors);  // each loop: a ChannelSet, or each TreeChannel
//   actor:    if (auto newest = take_newest_weights(channel)) act(newest->params, newest->version);
//
// Each version is copied once into a consolidated host tree (its version a leaf beside the
// parameters; CUDA parameters are packed on their GPU and staged into page-locked host memory, and
// arrive on the actor's current GPU) that every channel sends without a copy of its own, posted: a channel sends one
// version at a time, and one published meanwhile replaces the version waiting behind it, so a slow
// actor receives the newest version and never a queue of old ones, and the learner never waits for
// it. A channel offered the current version for the first time (a newly connected actor) gets it
// first. Versions and the policy lag work as on one node (stamp_policy_version, drop_stale_rows).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "tensortree/channel_set.hpp"
#include "tensortree/export.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/tree_channel.hpp"

namespace tensortree {

class TT_API ChannelWeightPublisher {
 public:
  ChannelWeightPublisher();
  ChannelWeightPublisher(ChannelWeightPublisher&&) noexcept;
  ChannelWeightPublisher& operator=(ChannelWeightPublisher&&) noexcept;
  ~ChannelWeightPublisher();

  // Copies `params` (host or CUDA leaves) and makes it the current version: the previous + 1, or
  // `version` when given (it must be larger: InvalidArgument). Sends nothing itself: offer_to does.
  std::uint64_t publish(const TensorTree& params);
  std::uint64_t publish(const TensorTree& params, std::uint64_t version);
  // The current version (0 before the first publish).
  std::uint64_t version() const;

  // Posts the current version to `channel` unless it already sent or holds it (see
  // TreeChannel::post), and progresses what the channel is sending; returns at once. Call it for
  // every channel as often as the learner's loop turns. It never throws for the actor's failure or
  // close: the channel records it, and its receiving calls report it after the trees the actor
  // sent before it (so a loop that offers, then receives, loses none); is_open() says so at once.
  // A version goes to an actor once it has taken the one before: it holds at most one unread.
  void offer_to(TreeChannel& channel) const;
  // offer_to each channel of `channels`, when a version was published or a channel added since
  // the last call for this set; otherwise returns at once (the set's turns and sweeps progress what
  // its channels send): a learner may call it every turn whatever the number of actors.
  void offer_to(ChannelSet& channels) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// What an actor received: the parameters (a tree viewing the channel's pooled buffer; keep it as
// long as needed) and their version.
struct ChannelWeights {
  std::uint64_t version = 0;
  TensorTree params;
};

// The newest version that arrived on `channel` (older ones that arrived with it are passed over),
// waiting at most `wait` when none has; nullopt when none came. CorruptData when what arrived is
// not a version of a ChannelWeightPublisher.
TT_API std::optional<ChannelWeights> take_newest_weights(TreeChannel& channel,
                                                          std::chrono::milliseconds wait = std::chrono::milliseconds{0});

}  // namespace tensortree
