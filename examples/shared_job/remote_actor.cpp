// A remote actor: an actor "on another node" (in the launcher's network namespace) that reaches the
// learner only through a tree channel. It acts as a local actor does (acting.hpp) and sends each
// trajectory over the channel, where the learner checks it and extends it into the replay buffer.
// It stops when the launcher's stop file appears or the launcher is gone; a channel that fails
// because the learner finished is a clean end, one that fails otherwise is this actor's failure.
#include <cinttypes>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <thread>

#include "acting.hpp"
#include "job.hpp"
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

// The weights this actor acts with. Version 1 until another arrives: the learner publishes it
// before it listens, so it is what every actor starts from.
struct HeldWeights {
  TensorTree params;
  std::int64_t version = 1;

  explicit HeldWeights(std::int64_t elements) : params(make_params(elements)) { fill_params(params, version); }
};

}  // namespace

int run_remote_actor(const Options& o) {
  TreeChannel channel = TreeChannel::connect(o.address, {.timeout = channel_timeout(o)});
  HeldWeights weights(o.params);
  TensorTree trajectory = make_trajectory(o.steps, o.obs_dim);
  std::int64_t sent = 0;
  try {
    while (run_goes_on(o)) {
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
