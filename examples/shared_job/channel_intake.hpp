// The learner's side of the remote actors: a listener, the channels remote actors open at any time
// (one ChannelSet), and what arrives on each. Every turn of the learner's loop it accepts the
// channels that are waiting, offers the set the newest weight version (ChannelWeightPublisher:
// posted, so the learner never waits for an actor), takes the trajectories that arrived (in turn,
// every element checked, then extended into the same replay buffer the local actors fill), and
// drops a channel that fails with a line naming its actor and why; the learner carries on with the
// others.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "job.hpp"
#include "tensortree/channel_set.hpp"
#include "tensortree/channel_weights.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/tree_channel.hpp"
#include "values.hpp"

namespace shared_job {

class ChannelIntake {
 public:
  // Binds the listener on o.listen and writes its address to address_path(o.name) for the launcher.
  explicit ChannelIntake(const Options& o);

  // Makes `params` the version every channel is offered next, under the number the learner's
  // WeightPublisher gave it: the same versions and policy lag on both sides.
  void publish(const tensortree::TensorTree& params, std::uint64_t version) { weights_.publish(params, version); }

  // One turn of the learner's loop; returns at once when nothing waits. Returns the wrong elements
  // in what arrived (such a trajectory is not extended, and its channel is ended).
  std::int64_t poll(tensortree::ReplayBuffer& replay, const RowRules& rules);

  std::int64_t trajectories() const;
  // Trajectories per remote actor and how each channel ended, then how long the learner took to
  // notice the remote actor the launcher killed (kill_note_path). False when it did not notice
  // within the channel timeout.
  bool report() const;

 private:
  using Clock = std::chrono::steady_clock;

  // One remote actor's channel, as the learner saw it.
  struct Source {
    std::string peer;               // kept: a closed channel no longer names it
    std::int64_t actor = -1;        // from its first trajectory
    std::int64_t first = 0;         // the number of its first trajectory
    std::int64_t trajectories = 0;  // checked and extended
    std::string ended;              // "" while open, else what ended it
    Clock::time_point ended_at{};
  };

  void accept();
  // Checks and extends a trajectory of the channel `key`; returns the wrong elements found.
  std::int64_t take(tensortree::ChannelSet::Key key, const tensortree::TensorTree& trajectory,
                    tensortree::ReplayBuffer& replay, const RowRules& rules);
  // "" when `trajectory` is the next one of `source`'s actor with every element as expected.
  std::string check(Source& source, const tensortree::TensorTree& trajectory, const RowRules& rules,
                    std::int64_t& wrong);
  // Records why the channel `key` ended; closes it when it is still in the set.
  void end(tensortree::ChannelSet::Key key, const std::string& why);
  bool report_kill(std::int64_t actor, Clock::time_point killed_at) const;

  Options options_;
  ActorIds ids_;
  tensortree::TreeListener listener_;
  tensortree::ChannelWeightPublisher weights_;
  tensortree::ChannelSet channels_;
  std::map<tensortree::ChannelSet::Key, Source> sources_;  // every channel accepted, in order
  Clock::time_point start_;
};

}  // namespace shared_job
