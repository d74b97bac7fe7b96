// A remote actor: an actor "on another node" (in the launcher's network namespace) that reaches the
// learner only through a tree channel. Before each trajectory it takes the newest weight version
// that arrived on the channel (every element checked), acts as a local actor does (acting.hpp) and
// sends the trajectory over the channel, where the learner checks it and extends it into the
// replay buffer.
// Its channel outlives the learner (ReconnectingChannel): when the learner dies, the actor goes on
// acting with the last weights it took, keeps its newest trajectories, and sends them to the
// learner that comes back at the same address. It stops when the launcher's stop file appears or
// the launcher is gone.
#include <cinttypes>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include "acting.hpp"
#include "job.hpp"
#include "tensortree/channel_weights.hpp"
#include "tensortree/reconnecting_channel.hpp"
#include "values.hpp"

using namespace tensortree;

namespace shared_job {

namespace {

using Clock = std::chrono::steady_clock;

// The weights this actor acts with: the newest version that arrived, every element checked. The
// first version comes before the first trajectory: a channel is offered the current version as
// soon as the learner sees it.
struct HeldWeights {
  TensorTree params;
  std::int64_t version = 0;

  // Takes a newer version if one arrived; waits (briefly) only while none is held. False when none
  // is held yet.
  bool refresh(const Options& o, ReconnectingChannel& learner) {
    const auto wait = std::chrono::milliseconds(version > 0 ? 0 : 100);
    std::optional<ChannelWeights> newest = learner.take_newest_weights(wait);
    if (!newest) return version > 0;
    const auto arrived = static_cast<std::int64_t>(newest->version);
    check_weights(o, newest->params, arrived);
    params = std::move(newest->params);
    version = arrived;
    return true;
  }
};

}  // namespace

int run_remote_actor(const Options& o) {
  // Kept trajectories: about what the actor makes in the time a learner takes to restart.
  ReconnectingChannel learner(o.address, {.channel = {.timeout = channel_timeout(o)}, .max_kept_trees = 256});
  HeldWeights weights;
  TensorTree trajectory = make_trajectory(o.steps, o.obs_dim);
  std::int64_t acted = 0;
  while (run_goes_on(o)) {
    if (!weights.refresh(o, learner)) continue;  // the first version is on its way
    act(o, trajectory, acted, weights.params, weights.version);
    learner.send(trajectory);
    ++acted;
  }
  const ReconnectStats stats = learner.stats();
  std::printf("[remote actor %d] acted %" PRId64 " trajectories: %" PRIu64 " sent over %s on %" PRIu64
              " connections, %" PRIu64 " dropped while no learner listened, %" PRIu64 " kept at the end\n",
              o.actor_id, acted, stats.trees_sent, o.address.c_str(), stats.connections, stats.trees_dropped,
              stats.trees_kept);
  std::fflush(stdout);
  return 0;
}

}  // namespace shared_job
