// The launcher: starts the learner and the actors as processes of this program (posix_spawn of
// itself with a role flag), remote actors inside another node (remote_site.hpp) once the learner
// says where it listens, optionally SIGKILLs one actor halfway and starts a replacement, tells
// the actors to stop once the learner is done, and waits for everyone, each wait bounded.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actor_phase.hpp"
#include "child.hpp"
#include "job.hpp"
#include "remote_site.hpp"
#include "tensortree/channel_credential.hpp"
#include "tensortree/weights.hpp"

namespace shared_job {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Set by SIGINT or SIGTERM: the launcher stops the job and still removes what it made (the other
// node's namespace and veth pair, the shared objects) rather than dying with them in place.
volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_interrupt(int /*signal*/) { interrupted = 1; }

void catch_interrupts() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

Clock::time_point after(Clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void remove_shared_objects(const std::string& name, int actor_ids) {
  std::error_code ignored;
  for (int id = 0; id < actor_ids; ++id) fs::remove(phase_path(name, id), ignored);
  fs::remove_all(replay_path(name), ignored);
  for (const fs::path& path : {stop_path(name), address_path(name), kill_note_path(name)}) fs::remove(path, ignored);
  fs::remove(tensortree::WeightPublisher::shared_memory_path(policy_name(name)), ignored);
}

// Another node for the remote actors, or this host's loopback when none can be made (said so).
RemoteSite remote_site(std::unique_ptr<tensortree::tools::OtherNode>& node) {
  std::string why;
  node = tensortree::tools::OtherNode::make(why);
  if (node) return namespace_site(*node);
  std::printf("[launcher] no network namespace for the remote actors (%s): they run on 127.0.0.1 instead\n",
              why.c_str());
  return loopback_site();
}

// SIGKILLs a local actor, if it can in the middle of an extend: it waits (bounded) until the
// actor's phase word says Extending and sends the signal then. Returns what it did, for the report.
std::string kill_mid_extend(const std::string& name, int id, Child& victim) {
  ActorPhase phase;
  const Clock::time_point deadline = after(Clock::now(), 2);
  while (!ActorPhase::try_open(phase_path(name, id), phase) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  bool mid_extend = false;
  // A tight loop: an extend takes microseconds.
  while (!mid_extend && Clock::now() < deadline) mid_extend = phase.get() == Phase::Extending;
  kill_now(victim);
  return "killed " + victim.label + " (pid " + std::to_string(victim.pid) + ", SIGKILL" +
         (mid_extend ? " while it was extending the buffer)" : ")");
}

// SIGKILLs a remote actor, first noting when, so that the learner can say how long its channel
// took to notice.
std::string kill_remote(const std::string& name, int id, Child& victim) {
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch());
  std::ofstream(kill_note_path(name)) << id << ' ' << now.count() << '\n';
  kill_now(victim);
  return "killed " + victim.label + " (pid " + std::to_string(victim.pid) + ", SIGKILL, mid-run on its channel)";
}

// One run: the processes and how to start them.
class Run {
 public:
  explicit Run(const Options& o) : o_(o), ids_(actor_ids(o)), exe_(fs::read_symlink("/proc/self/exe")) {}

  bool run();

 private:
  std::vector<std::string> command(std::vector<std::string> role, const Options& run) const;
  std::vector<std::string> command(std::vector<std::string> role) const { return command(std::move(role), o_); }
  void start_learner();
  void restart_learner(double at);
  void start_actor(int id);
  void start_remote_actor(int id);
  bool wait_for_address();
  // Where the actor to kill is in actors_: the first remote one, else the first.
  std::size_t victim_index() const { return o_.remote_actors > 0 ? static_cast<std::size_t>(o_.actors) : 0; }
  void kill_and_replace(double at);
  bool supervise();
  bool finish();

  Options o_;
  ActorIds ids_;
  fs::path exe_;
  std::unique_ptr<tensortree::tools::OtherNode> node_;  // outlives the remote actors: declared before them
  std::optional<RemoteSite> site_;   // with remote actors
  std::string address_;              // the learner's listener
  Child learner_;
  std::vector<Child> actors_;        // local and remote, the killed one included
  std::string kill_report_;
  std::string learner_report_;
};

std::vector<std::string> Run::command(std::vector<std::string> role, const Options& run) const {
  std::vector<std::string> line{exe_.string()};
  const std::vector<std::string> flags = run_flags(run);
  line.insert(line.end(), flags.begin(), flags.end());
  line.insert(line.end(), role.begin(), role.end());
  return line;
}

void Run::start_learner() {
  std::vector<std::string> role{"--role", "learner"};
  if (!o_.python_learner.empty()) {
    // Debian's interpreter, the one that sees Debian's torch; the run's flags as for our own learner.
    std::vector<std::string> line = command(role);
    line.front() = o_.python_learner;
    line.insert(line.begin(), "/usr/bin/python3");
    learner_ = {"learner (Python)", spawn(line)};
    return;
  }
  if (site_) role.insert(role.end(), {"--listen", site_->listen});
  learner_ = {"learner", spawn(command(role), site_ ? site_->learner_env : std::vector<std::string>{})};
}

// SIGKILLs the learner and starts another in its place, for the rest of the run: it reopens the
// replay buffer and the weight publication (the actors keep theirs) and listens at the address the
// remote actors know, where they connect again.
void Run::restart_learner(double at) {
  kill_now(learner_);
  Options rest = o_;
  rest.seconds = std::max(o_.seconds - at, 1.0);
  std::vector<std::string> role{"--role", "learner", "--resume"};
  if (site_) role.insert(role.end(), {"--listen", address_});
  learner_ = {"learner (resumed)", spawn(command(role, rest), site_ ? site_->learner_env : std::vector<std::string>{})};
  char line[160];
  std::snprintf(line, sizeof line, "[launcher] killed the learner (SIGKILL) at %.1f s and started another (pid %d) "
                "that resumes the buffer and the weights", at, learner_.pid);
  learner_report_ = line;
  std::printf("%s\n", learner_report_.c_str());
  std::fflush(stdout);
}

void Run::start_actor(int id) {
  actors_.push_back({"actor " + std::to_string(id), spawn(command({"--role", "actor", "--actor-id", std::to_string(id)}))});
}

void Run::start_remote_actor(int id) {
  std::vector<std::string> line = site_->actor_prefix;
  const std::vector<std::string> actor =
      command({"--role", "remote-actor", "--actor-id", std::to_string(id), "--address", address_});
  line.insert(line.end(), actor.begin(), actor.end());
  // `ip netns exec` and `env` exec the program in place: the pid is the actor's.
  actors_.push_back({"remote actor " + std::to_string(id), spawn(line)});
}

// The learner writes its listener's address once it listens; false when it ended first.
bool Run::wait_for_address() {
  const Clock::time_point deadline = after(Clock::now(), 30);
  while (!poll(learner_) && Clock::now() < deadline && interrupted == 0) {
    if (std::ifstream file(address_path(o_.name)); file >> address_) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::fprintf(stderr, "[launcher] the learner gave no address for the remote actors\n");
  return false;
}

// Kills the first remote actor (or local actor 0 when there are no remote ones) and starts a
// replacement under the last id.
void Run::kill_and_replace(double at) {
  const bool remote = o_.remote_actors > 0;
  const int victim_id = remote ? ids_.remote_begin : 0;
  Child& victim = actors_[victim_index()];
  victim.killed_on_purpose = true;
  std::string report = remote ? kill_remote(o_.name, victim_id, victim) : kill_mid_extend(o_.name, victim_id, victim);
  if (remote) {
    start_remote_actor(ids_.end - 1);
  } else {
    start_actor(ids_.local_end - 1);
  }
  char when[64];
  std::snprintf(when, sizeof when, " at %.1f s", at);
  kill_report_ = "[launcher] " + report + when + " and started " + actors_.back().label + " (pid " +
                 std::to_string(actors_.back().pid) + ") in its place";
  std::printf("%s\n", kill_report_.c_str());
  std::fflush(stdout);
}

bool Run::run() {
  if (o_.remote_actors > 0) site_ = remote_site(node_);
  const std::string policy = tensortree::WeightPublisher::shared_memory_path(policy_name(o_.name)).string();
  std::printf("[launcher] %d actors and a learner through %s and %s, %.1f s\n", o_.actors,
              replay_path(o_.name).c_str(), policy.c_str(), o_.seconds);
  if (site_) std::printf("[launcher] %d remote actors in %s\n", o_.remote_actors, site_->description.c_str());
  std::fflush(stdout);
  start_learner();
  for (int id = 0; id < o_.actors; ++id) start_actor(id);
  if (site_ && wait_for_address()) {
    for (int id = ids_.remote_begin; id < ids_.remote_begin + o_.remote_actors; ++id) start_remote_actor(id);
  }
  const bool killed_as_asked = supervise();
  return finish() && killed_as_asked;
}

// Until the learner is done: halfway through, the learner (--kill-learner) or an actor is killed
// and replaced; with both, the actor at three quarters, under the resumed learner. False when the
// learner ended before that could happen.
bool Run::supervise() {
  const Clock::time_point start = Clock::now();
  const Clock::time_point learner_kill_at = after(start, o_.seconds / 2);
  const Clock::time_point kill_at = after(start, o_.seconds * (o_.kill_learner ? 0.75 : 0.5));
  const Clock::time_point learner_deadline = after(start, o_.seconds + 60);
  bool learner_kill_pending = o_.kill_learner;
  bool kill_pending = o_.kill_actor && victim_index() < actors_.size();  // remote ones may not have started
  for (;;) {
    if (poll(learner_)) break;
    if (learner_kill_pending && Clock::now() >= learner_kill_at) {
      restart_learner(std::chrono::duration<double>(Clock::now() - start).count());
      learner_kill_pending = false;
    }
    if (kill_pending && Clock::now() >= kill_at) {
      kill_and_replace(std::chrono::duration<double>(Clock::now() - start).count());
      kill_pending = false;
    }
    if (interrupted != 0) std::fprintf(stderr, "[launcher] interrupted: stopping the job\n");
    if (interrupted != 0 || Clock::now() >= learner_deadline) {
      wait_until(learner_, Clock::now());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (kill_pending) std::fprintf(stderr, "[launcher] the learner ended before an actor could be killed\n");
  if (learner_kill_pending) std::fprintf(stderr, "[launcher] the learner ended before it could be killed\n");
  return !kill_pending && !learner_kill_pending;
}

// Tells the actors to stop, waits for them, and reports.
bool Run::finish() {
  std::ofstream(stop_path(o_.name)).put('\n');
  bool ok = succeeded(learner_);
  const Clock::time_point actors_deadline = after(Clock::now(), 20);
  int finished = 0;
  for (Child& actor : actors_) {
    if (actor.killed_on_purpose) continue;
    if (wait_until(actor, actors_deadline) && succeeded(actor)) {
      ++finished;
    } else {
      std::fprintf(stderr, "[launcher] %s (pid %d) failed: %s\n", actor.label.c_str(), actor.pid,
                   describe(actor).c_str());
      ok = false;
    }
  }
  if (!learner_report_.empty()) std::printf("%s; it carried on\n", learner_report_.c_str());
  if (!kill_report_.empty()) std::printf("%s; the learner carried on\n", kill_report_.c_str());
  std::printf("[launcher] learner: %s; actors: %d finished cleanly%s; %s\n", describe(learner_).c_str(), finished,
              kill_report_.empty() ? "" : " (one more killed and replaced)", ok ? "every check passed" : "FAILED");
  return ok;
}

}  // namespace

int run_launcher(Options o) {
  o.name = "tensortree_shared_job_" + std::to_string(::getpid());
  o.launcher_pid = ::getpid();
  // The job's channel credential: made here unless given, and passed to the learner and the remote
  // actors in TENSORTREE_CHANNEL_KEY (children inherit it), so only this job's actors get in.
  if (o.remote_actors > 0 && std::getenv(tensortree::kChannelKeyVariable) == nullptr) {
    ::setenv(tensortree::kChannelKeyVariable, tensortree::ChannelCredential::generate().secret_text().c_str(), 1);
  }
  catch_interrupts();
  const int ids = actor_ids(o).end;
  remove_shared_objects(o.name, ids);
  bool ok = false;
  {
    Run run(o);
    ok = run.run();
  }  // the other node goes here, once its actors are done
  remove_shared_objects(o.name, ids);
  return ok ? 0 : 1;
}

}  // namespace shared_job
