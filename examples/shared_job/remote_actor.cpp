// A remote actor: an actor "on another node" (in the launcher's network namespace) that reaches the
// learner only through a tree channel. Before each trajectory it takes the newest weight version
// that arrived on the channel (every element checked), acts as a local actor does (acting.hpp) and
// sends the trajectory over the channel, where the learner checks it and extends it into the
// replay buffer.
// It stops when the launcher's stop file appears or the launcher is gone; a channel that fails
// because the learner finished is a clean end, one that fails otherwise is this actor's failure.
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
#include "tensortree/error.hpp"
#include "tensortree/tree_channel.hpp"
#include "values.hpp"

using namespace tensortree;

namespace shared_job {

namespace {

using Clock = std::chrono::steady_clock;

// The learner's channels end when it finishes, a moment before the launcher creates the stop
// file: a failed channel is the end of the run when the file follows within a few seconds.
bool run_ended(const Options& o) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  while (run_goes_on(o) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !run_goes_on(o);
}

// The weights this actor acts with: the newest version that arrived, every element checked. The
// first version comes before the first trajectory: a channel is offered the current version as
// soon as the learner sees it.
struct HeldWeights {
  TensorTree params;
  std::int64_t version = 0;

  // Takes a newer version if one arrived; waits (briefly) only while none is held. False when none
  // is held yet.
  bool refresh(const Options& o, TreeChannel& channel) {
    const auto wait = std::chrono::milliseconds(version > 0 ? 0 : 100);
    std::optional<ChannelWeights> newest = take_newest_weights(channel, wait);
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
  TreeChannel channel = TreeChannel::connect(o.address, {.timeout = channel_timeout(o)});
  HeldWeights weights;
  TensorTree trajectory = make_trajectory(o.steps, o.obs_dim);
  std::int64_t sent = 0;
  try {
    while (run_goes_on(o)) {
      if (!weights.refresh(o, channel)) continue;  // the first version is on its way
      act(o, trajectory, sent, weights.params, weights.version);
      channel.send(trajectory);
      ++sent;
    }
    channel.close();
  } catch (const Error&) {
    if (!run_ended(o)) throw;
  }
  std::printf("[remote actor %d] sent %" PRId64 " trajectories over %s\n", o.actor_id, sent, o.address.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace shared_job
