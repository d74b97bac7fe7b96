// An actor: opens the replay buffer and the weight publication by name, leases the newest weights
// (checking every element against its version), acts with them for one trajectory stamped with
// that version, and extends the buffer, until the launcher's stop file appears or the launcher is
// gone.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>

#include "job.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/weights.hpp"
#include "values.hpp"

using namespace tensortree;

namespace shared_job {

int run_actor(const Options& o) {
  // The learner creates the buffer before its first publish: once the weights are there, so is it.
  const WeightSubscriber weights(policy_name(o.name));
  ReplayBuffer replay = ReplayBuffer::open(replay_path(o.name));
  TensorTree trajectory = make_trajectory(o.steps, o.obs_dim);
  const std::filesystem::path stop = stop_path(o.name);

  std::int64_t trajectories = 0;
  while (!std::filesystem::exists(stop) && ::getppid() == o.launcher_pid) {
    {
      WeightLease lease = weights.latest();
      const auto version = static_cast<std::int64_t>(lease.version());
      if (const std::int64_t wrong = wrong_param_elements(lease.tree(), version); wrong != 0) {
        std::fprintf(stderr, "[actor %d] %" PRId64 " wrong elements in the weights of version %" PRId64 "\n",
                     o.actor_id, wrong, version);
        return 1;
      }
      fill_trajectory(trajectory, o.actor_id, trajectories, lease.tree(), version);
    }
    replay.extend(trajectory);
    ++trajectories;
  }
  std::printf("[actor %d] wrote %" PRId64 " trajectories\n", o.actor_id, trajectories);
  std::fflush(stdout);
  return 0;
}

}  // namespace shared_job
