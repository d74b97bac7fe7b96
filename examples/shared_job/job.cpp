// The names of the run's shared objects, and the run's flags as the launcher passes them on.
#include "job.hpp"

#include "tensortree/replay_buffer.hpp"

namespace shared_job {

std::filesystem::path replay_path(const std::string& name) {
  return tensortree::ReplayBuffer::shared_memory_path(name + "_replay");
}
std::string policy_name(const std::string& name) { return name + "_policy"; }
std::filesystem::path stop_path(const std::string& name) {
  return std::filesystem::path("/dev/shm") / (name + "_stop");
}

std::vector<std::string> run_flags(const Options& o) {
  std::vector<std::string> flags{"--seconds",       std::to_string(o.seconds),
                                 "--capacity",      std::to_string(o.capacity),
                                 "--steps",         std::to_string(o.steps),
                                 "--obs-dim",       std::to_string(o.obs_dim),
                                 "--batch",         std::to_string(o.batch),
                                 "--params",        std::to_string(o.params),
                                 "--publish-every", std::to_string(o.publish_every),
                                 "--max-lag",       std::to_string(o.max_lag),
                                 "--name",          o.name,
                                 "--launcher-pid",  std::to_string(o.launcher_pid)};
  if (o.corrupt) flags.emplace_back("--corrupt");
  return flags;
}

}  // namespace shared_job
