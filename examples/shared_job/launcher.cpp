// The launcher: starts the learner and the actors as processes of this program (posix_spawn of
// itself with a role flag), optionally SIGKILLs one actor halfway and starts a replacement, tells
// the actors to stop once the learner is done, and waits for everyone, each wait bounded.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actor_phase.hpp"
#include "job.hpp"

extern char** environ;

namespace shared_job {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Child {
  std::string label;   // "learner" or "actor N"
  pid_t pid = 0;
  int status = 0;      // waitpid's, once exited
  bool exited = false;
  bool killed_on_purpose = false;
};

pid_t spawn(const fs::path& exe, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string program = exe.string();
  argv.push_back(program.data());
  std::vector<std::string> copy = args;
  for (std::string& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int error = ::posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv.data(), environ); error != 0) {
    throw std::runtime_error("posix_spawn of " + program + " failed: error " + std::to_string(error));
  }
  return pid;
}

bool poll(Child& child) {
  if (!child.exited && ::waitpid(child.pid, &child.status, WNOHANG) == child.pid) child.exited = true;
  return child.exited;
}

// Waits until `child` exits or `deadline` passes; then SIGKILLs it. True when it exited by itself.
bool wait_until(Child& child, Clock::time_point deadline) {
  while (!poll(child)) {
    if (Clock::now() >= deadline) {
      std::fprintf(stderr, "[launcher] %s (pid %d) did not finish in time: killing it\n", child.label.c_str(),
                   child.pid);
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &child.status, 0);
      child.exited = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

Clock::time_point after(Clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

bool succeeded(const Child& child) { return WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0; }

std::string describe(const Child& child) {
  if (WIFEXITED(child.status)) return "exit " + std::to_string(WEXITSTATUS(child.status));
  if (WIFSIGNALED(child.status)) return "signal " + std::to_string(WTERMSIG(child.status));
  return "status " + std::to_string(child.status);
}

void remove_shared_objects(const std::string& name, int actor_ids) {
  std::error_code ignored;
  for (int id = 0; id < actor_ids; ++id) fs::remove(phase_path(name, id), ignored);
  fs::remove_all(replay_path(name), ignored);
  fs::remove(stop_path(name), ignored);
  fs::remove(fs::path("/dev/shm") / policy_name(name), ignored);
}

// SIGKILLs `victim`, if it can in the middle of an extend: it waits (bounded) until the actor's
// phase word says Extending and sends the signal then. Returns what it did, for the report.
std::string kill_mid_extend(const std::string& name, int id, Child& victim) {
  ActorPhase phase;
  const Clock::time_point deadline = after(Clock::now(), 2);
  while (!ActorPhase::try_open(phase_path(name, id), phase) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  bool mid_extend = false;
  // A tight loop: an extend takes microseconds.
  while (!mid_extend && Clock::now() < deadline) mid_extend = phase.get() == Phase::Extending;
  ::kill(victim.pid, SIGKILL);
  ::waitpid(victim.pid, &victim.status, 0);
  victim.exited = true;
  victim.killed_on_purpose = true;
  return "killed " + victim.label + " (pid " + std::to_string(victim.pid) + ", SIGKILL" +
         (mid_extend ? " while it was extending the buffer)" : ")");
}

}  // namespace

int run_launcher(Options o) {
  o.name = "tensortree_shared_job_" + std::to_string(::getpid());
  o.launcher_pid = ::getpid();
  const int max_actor_ids = o.actors + (o.kill_actor ? 1 : 0);
  remove_shared_objects(o.name, max_actor_ids);
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  const std::vector<std::string> flags = run_flags(o);
  const auto with = [&flags](std::vector<std::string> more) {
    more.insert(more.begin(), flags.begin(), flags.end());
    return more;
  };
  const auto start_actor = [&](int id) {
    return Child{"actor " + std::to_string(id),
                 spawn(exe, with({"--role", "actor", "--actor-id", std::to_string(id)}))};
  };

  std::printf("[launcher] %d actors and a learner through %s and /dev/shm/%s, %.1f s\n", o.actors,
              replay_path(o.name).c_str(), policy_name(o.name).c_str(), o.seconds);
  std::fflush(stdout);
  Child learner{"learner",
                spawn(exe, with({"--role", "learner", "--max-actor-ids", std::to_string(max_actor_ids)}))};
  std::vector<Child> actors;
  for (int id = 0; id < o.actors; ++id) actors.push_back(start_actor(id));

  // Until the learner is done: halfway through, the first actor is killed and replaced.
  const Clock::time_point start = Clock::now();
  const Clock::time_point kill_at = after(start, o.seconds / 2);
  const Clock::time_point learner_deadline = after(start, o.seconds + 60);
  bool kill_pending = o.kill_actor;
  std::string kill_report;
  while (!poll(learner)) {
    if (kill_pending && Clock::now() >= kill_at) {
      const double at = std::chrono::duration<double>(Clock::now() - start).count();
      kill_report = kill_mid_extend(o.name, 0, actors.front());
      kill_pending = false;
      actors.push_back(start_actor(o.actors));
      char line[64];
      std::snprintf(line, sizeof line, " at %.1f s", at);
      kill_report = "[launcher] " + kill_report + line + " and started " + actors.back().label + " (pid " +
                    std::to_string(actors.back().pid) + ") in its place";
      std::printf("%s\n", kill_report.c_str());
      std::fflush(stdout);
    }
    if (Clock::now() >= learner_deadline) {
      wait_until(learner, Clock::now());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  std::ofstream(stop_path(o.name)).put('\n');
  bool ok = succeeded(learner) && !kill_pending;
  const Clock::time_point actors_deadline = after(Clock::now(), 20);
  int finished = 0;
  for (Child& actor : actors) {
    if (actor.killed_on_purpose) continue;
    if (wait_until(actor, actors_deadline) && succeeded(actor)) {
      ++finished;
    } else {
      std::fprintf(stderr, "[launcher] %s (pid %d) failed: %s\n", actor.label.c_str(), actor.pid,
                   describe(actor).c_str());
      ok = false;
    }
  }
  remove_shared_objects(o.name, max_actor_ids);

  if (!kill_report.empty()) std::printf("%s; the learner carried on\n", kill_report.c_str());
  if (kill_pending) std::fprintf(stderr, "[launcher] the learner ended before an actor could be killed\n");
  std::printf("[launcher] learner: %s; actors: %d finished cleanly%s; %s\n", describe(learner).c_str(), finished,
              kill_report.empty() ? "" : " (one more killed and replaced)", ok ? "every check passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace shared_job
