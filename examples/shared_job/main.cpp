// shared_job: the main job on the shared data path. One launcher process starts a learner and N
// actors on this node (this program again, with a role flag); they meet through a ReplayBuffer
// and a WeightPublisher in /dev/shm, with no server and no MPI.
//
//   learner (learner.cpp): creates both, samples, checks every sampled element against what its
//     row's (actor, trajectory, step, policy_version) determine (values.hpp), publishes a new
//     weight version every --publish-every samples, reports throughput and policy lag.
//   actors (actor.cpp): lease the newest weights (every element checked), act with them for one
//     trajectory stamped with their version, extend the buffer; until the learner is done.
//   remote actors (remote_actor.cpp), with --remote-actors N: actors "on another node" (a network
//     namespace joined by a veth pair, tools/other_node.hpp) that receive the weights and send their
//     trajectories over tree channels; the learner checks every element of what arrives and extends
//     it into the same buffer (channel_intake.cpp).
//   launcher (launcher.cpp): with --kill-actor, SIGKILLs an actor halfway (a remote one when there
//     are some) and starts another.
//
//   shared_job [--seconds 10] [--actors 3] [--remote-actors 0] [--capacity 32768] [--kill-actor] [--help]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "job.hpp"

using namespace shared_job;

namespace {

void add_flags(CLI::App& app, Options& o) {
  app.option_defaults()->always_capture_default();
  app.add_option("--seconds", o.seconds, "how long the learner samples")->check(CLI::Range(0.1, 86400.0));
  app.add_option("--actors", o.actors, "actor processes")->check(CLI::Range(1, 256));
  app.add_option("--remote-actors", o.remote_actors,
                 "actors on another node (a network namespace), sending trajectories over tree channels")
      ->check(CLI::Range(0, 64));
  app.add_option("--capacity", o.capacity, "rows in the replay ring")->check(CLI::Range(1, 1 << 30));
  app.add_flag("--kill-actor", o.kill_actor,
               "SIGKILL an actor (a remote one when there are some) halfway through the run and start a "
               "replacement; the run must still pass");
  app.add_flag("--kill-learner", o.kill_learner,
               "SIGKILL the learner a third of the way through the run and start a new one, which reopens the "
               "replay buffer and the weight publication and carries on from the newest version; remote actors "
               "keep acting and reconnect; the run must still pass");
  app.add_flag("--corrupt", o.corrupt,
               "testing the checks: one actor (the first remote one, if any) writes one wrong observation "
               "element in every trajectory, and the run must fail");
  app.add_option("--steps", o.steps, "rows per trajectory (one extend)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--obs-dim", o.obs_dim, "float32 elements per observation")->check(CLI::Range(1, 1 << 24));
  app.add_option("--batch", o.batch, "rows per sample")->check(CLI::Range(1, 1 << 24));
  app.add_option("--publish-every", o.publish_every, "samples between two weight versions")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--max-lag", o.max_lag, "rows acted with a version older than this lag are dropped")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--params", o.params, "float32 elements of the published weights")->check(CLI::Range(1, 1 << 28));
  app.add_option("--channel-timeout", o.channel_timeout,
                 "seconds a remote actor's channel may stay silent before the learner ends it")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--python-learner", o.python_learner,
                 "run this Python learner (examples/python/learner.py) with /usr/bin/python3 in place of the C++ "
                 "one; PYTHONPATH must name the tensortree module (build/python)")
      ->check(CLI::ExistingFile);
  // Set by the launcher on its children's command lines.
  app.add_option("--role", o.role)->check(CLI::IsMember({"learner", "actor", "remote-actor"}))->group("");
  app.add_option("--name", o.name)->group("");
  app.add_option("--launcher-pid", o.launcher_pid)->group("");
  app.add_option("--actor-id", o.actor_id)->group("");
  app.add_option("--listen", o.listen)->group("");
  app.add_option("--address", o.address)->group("");
  app.add_flag("--resume", o.resume)->group("");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A learner and actor processes sharing a replay buffer and weights in /dev/shm, every element checked"};
  Options o;
  add_flags(app, o);
  CLI11_PARSE(app, argc, argv);
  if (!o.python_learner.empty() && o.kill_learner) {
    std::fprintf(stderr, "shared_job: --kill-learner restarts the C++ learner (no --python-learner)\n");
    return 2;
  }
  if (!o.python_learner.empty() && o.remote_actors > 0) {
    std::fprintf(stderr, "shared_job: --python-learner takes local actors only (no --remote-actors)\n");
    return 2;
  }
  try {
    if (o.role == "learner") return run_learner(o);
    if (o.role == "actor") return run_actor(o);
    if (o.role == "remote-actor") return run_remote_actor(o);
    return run_launcher(o);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[%s] shared_job failed: %s\n", o.role.empty() ? "launcher" : o.role.c_str(), error.what());
    return 1;
  }
}
