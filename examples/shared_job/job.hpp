// The shared-memory main job: what the launcher, the learner and the actors agree on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shared_job {

struct Options {
  // The run.
  double seconds = 10;          // how long the learner samples
  int actors = 3;               // actor processes running at once
  bool kill_actor = false;      // the launcher SIGKILLs an actor halfway and starts a replacement
  bool corrupt = false;         // testing the checks: actor 0 writes one wrong element per trajectory
  // The buffer and the rows.
  std::int64_t capacity = 1 << 15;  // rows in the ring
  std::int64_t steps = 64;          // rows per trajectory (one extend)
  std::int64_t obs_dim = 256;       // float32 elements of one observation
  // The learner.
  std::int64_t batch = 256;         // rows per sample
  std::int64_t publish_every = 100; // samples between two weight versions
  std::int64_t max_lag = 8;         // rows acted with an older version are dropped (and counted)
  std::int64_t params = 1 << 16;    // float32 elements of the published weights
  // A child's role, set by the launcher on the command lines it spawns.
  std::string role;        // "", "learner" or "actor"
  std::string name;        // the shared objects' common name
  int launcher_pid = 0;    // an actor stops when its parent is no longer this process
  int actor_id = 0;        // actor: its id (a replacement gets a new one)
  int max_actor_ids = 0;   // learner: ids below this are valid (actors plus replacements)
};

// Where the run's shared objects live, all derived from Options::name.
std::filesystem::path replay_path(const std::string& name);
std::string policy_name(const std::string& name);
// Created by the launcher once the learner is done: the actors stop at their next trajectory.
std::filesystem::path stop_path(const std::string& name);

// The flags that reproduce `o`'s run settings on a child's command line.
std::vector<std::string> run_flags(const Options& o);

int run_launcher(Options o);  // names the run itself
int run_learner(const Options& o);
int run_actor(const Options& o);

}  // namespace shared_job
