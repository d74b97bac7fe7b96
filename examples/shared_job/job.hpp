// The shared-memory main job: what the launcher, the learner and the actors agree on.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shared_job {

struct Options {
  // The run.
  double seconds = 10;          // how long the learner samples
  int actors = 3;               // actor processes running at once
  int remote_actors = 0;        // actors "on another node": in a network namespace, over tree channels
  bool kill_actor = false;      // the launcher SIGKILLs an actor halfway and starts a replacement
                                // (a remote one when there are remote actors)
  bool kill_learner = false;    // the launcher SIGKILLs the learner a third of the way and starts
                                // another, which resumes the buffer and the weights (an actor is then
                                // killed at two thirds under kill_actor)
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
  double channel_timeout = 3;       // seconds: a remote actor silent this long has its channel ended
  std::string python_learner;       // a Python learner (examples/python/learner.py) run by
                                    // /usr/bin/python3 in place of this program's; local actors only
  // A child's role, set by the launcher on the command lines it spawns.
  std::string role;        // "", "learner", "actor" or "remote-actor"
  std::string name;        // the shared objects' common name
  int launcher_pid = 0;    // an actor stops when its parent is no longer this process
  int actor_id = 0;        // actor: its id (a replacement gets a new one)
  std::string listen;      // learner: "ip:0" to take remote actors' channels on; "" when there are none
  bool resume = false;     // learner: reopen the buffer and the weight publication a killed learner left
  std::string address;     // remote actor: the learner's listener, "host:port"
};

// Which actor ids a run uses: local actors first, then remote ones, each range with room for the
// replacement that --kill-actor starts (a remote one when there are remote actors, else a local one).
struct ActorIds {
  int local_end = 0;     // local actors are [0, local_end)
  int remote_begin = 0;  // remote actors are [remote_begin, end)
  int end = 0;
  bool remote(std::int64_t id) const { return id >= remote_begin && id < end; }
};
ActorIds actor_ids(const Options& o);
// The actor that writes wrong elements under --corrupt: the first remote actor when there are
// some, so that the run shows the checks of what arrives over channels.
int corrupting_actor(const Options& o);

// Where the run's shared objects live, all derived from Options::name.
std::filesystem::path replay_path(const std::string& name);
std::string policy_name(const std::string& name);
// Created by the launcher once the learner is done: the actors stop at their next trajectory.
std::filesystem::path stop_path(const std::string& name);
// Written by the learner once it listens: the address remote actors connect to.
std::filesystem::path address_path(const std::string& name);
// Written by the launcher just before it SIGKILLs a remote actor: "ACTOR STEADY_CLOCK_NS", so that
// the learner can say how long it took to notice.
std::filesystem::path kill_note_path(const std::string& name);

// An actor's test before each trajectory: the launcher has not created the stop file and is still
// this process's parent.
bool run_goes_on(const Options& o);
// --channel-timeout as the channels take it.
std::chrono::milliseconds channel_timeout(const Options& o);

// The flags that reproduce `o`'s run settings on a child's command line.
std::vector<std::string> run_flags(const Options& o);

int run_launcher(Options o);  // names the run itself
int run_learner(const Options& o);
int run_actor(const Options& o);
int run_remote_actor(const Options& o);

}  // namespace shared_job
