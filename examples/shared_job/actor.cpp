// An actor: opens the replay buffer and the weight publication by name, leases the newest weights
// (checking every element against its version), acts with them for one trajectory stamped with
// that version, and extends the buffer, until the launcher's stop file appears or the launcher is
// gone.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <optional>

#include "acting.hpp"
#include "actor_phase.hpp"
#include "job.hpp"
#include "tensortree/error.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/weights.hpp"
#include "values.hpp"

using namespace tensortree;

namespace shared_job {

namespace {

// Waits (at most 10 s) for the learner's first publish, in short steps, so that an actor started
// as the run ends (a replacement) sees the stop file and leaves, rather than waiting for a
// publication the learner has already removed. Empty when the run is over.
std::optional<WeightSubscriber> subscribe(const Options& o) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::filesystem::exists(stop_path(o.name))) {
    try {
      return WeightSubscriber(policy_name(o.name), {.timeout = std::chrono::milliseconds(100)});
    } catch (const Timeout&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
    }
  }
  return std::nullopt;
}

}  // namespace

int run_actor(const Options& o) {
  const std::optional<WeightSubscriber> weights = subscribe(o);
  if (!weights) return 0;
  // The learner creates the buffer before its first publish: once the weights are there, so is it.
  ReplayBuffer replay = ReplayBuffer::open(replay_path(o.name));
  TensorTree trajectory = make_trajectory(o.steps, o.obs_dim);
  ActorPhase phase = ActorPhase::create(phase_path(o.name, o.actor_id));

  std::int64_t trajectories = 0;
  while (run_goes_on(o)) {
    phase.set(Phase::Acting);
    {
      WeightLease lease = weights->latest();
      const auto version = static_cast<std::int64_t>(lease.version());
      check_weights(o, lease.tree(), version);
      act(o, trajectory, trajectories, lease.tree(), version);
    }
    phase.set(Phase::Extending);
    replay.extend(trajectory);
    ++trajectories;
  }
  phase.set(Phase::Done);
  std::printf("[actor %d] wrote %" PRId64 " trajectories\n", o.actor_id, trajectories);
  std::fflush(stdout);
  return 0;
}

}  // namespace shared_job
