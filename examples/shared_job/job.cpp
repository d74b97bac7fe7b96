// The names of the run's shared objects, and the run's flags as the launcher passes them on.
#include "job.hpp"

#include <unistd.h>

#include "tensortree/replay_buffer.hpp"

namespace shared_job {

std::filesystem::path replay_path(const std::string& name) {
  return tensortree::ReplayBuffer::shared_memory_path(name + "_replay");
}
std::string policy_name(const std::string& name) { return name + "_policy"; }
std::filesystem::path stop_path(const std::string& name) {
  return std::filesystem::path("/dev/shm") / (name + "_stop");
}
std::filesystem::path address_path(const std::string& name) {
  return std::filesystem::path("/dev/shm") / (name + "_address");
}
std::filesystem::path kill_note_path(const std::string& name) {
  return std::filesystem::path("/dev/shm") / (name + "_killed");
}

ActorIds actor_ids(const Options& o) {
  const bool replace_remote = o.kill_actor && o.remote_actors > 0;
  const bool replace_local = o.kill_actor && o.remote_actors == 0;
  ActorIds ids;
  ids.local_end = o.actors + (replace_local ? 1 : 0);
  ids.remote_begin = ids.local_end;
  ids.end = ids.remote_begin + o.remote_actors + (replace_remote ? 1 : 0);
  return ids;
}

int corrupting_actor(const Options& o) { return o.remote_actors > 0 ? actor_ids(o).remote_begin : 0; }

bool run_goes_on(const Options& o) { return !std::filesystem::exists(stop_path(o.name)) && ::getppid() == o.launcher_pid; }

std::chrono::milliseconds channel_timeout(const Options& o) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(o.channel_timeout * 1000));
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
                                 "--actors",        std::to_string(o.actors),
                                 "--remote-actors", std::to_string(o.remote_actors),
                                 "--channel-timeout", std::to_string(o.channel_timeout),
                                 "--name",          o.name,
                                 "--launcher-pid",  std::to_string(o.launcher_pid)};
  if (o.corrupt) flags.emplace_back("--corrupt");
  if (o.kill_actor) flags.emplace_back("--kill-actor");  // the children need it for actor_ids()
  if (o.kill_learner) flags.emplace_back("--kill-learner");
  return flags;
}

}  // namespace shared_job
