#include "channel_intake.hpp"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <optional>
#include <utility>

#include "tensortree/error.hpp"

using namespace tensortree;

namespace shared_job {

namespace {

// Trajectories taken per channel per turn at most (the set gives them in turn), so that fast remote
// actors cannot hold up the learner's sampling.
constexpr std::size_t kMaxPerTurn = 4;
// Trajectories a remote actor may have sent that the learner has not taken: the trees of a killed
// actor that arrived whole are taken before its channel reports the death, so a small window is
// what lets the learner notice a death within a few turns of its loop.
constexpr std::uint64_t kTreesInFlight = 8;

const char* error_kind(const Error& error) {
  if (dynamic_cast<const ChannelClosed*>(&error) != nullptr) return "ChannelClosed";
  if (dynamic_cast<const PeerLost*>(&error) != nullptr) return "PeerLost";
  if (dynamic_cast<const Timeout*>(&error) != nullptr) return "Timeout";
  if (dynamic_cast<const CorruptData*>(&error) != nullptr) return "CorruptData";
  if (dynamic_cast<const SchemaMismatch*>(&error) != nullptr) return "SchemaMismatch";
  return "Error";
}

// Written whole under another name and renamed: the launcher never reads half an address.
void write_address(const std::filesystem::path& path, const std::string& address) {
  const std::filesystem::path partial = path.string() + ".partial";
  std::ofstream(partial) << address << '\n';
  std::filesystem::rename(partial, path);
}

double ms(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

ChannelIntake::ChannelIntake(const Options& o)
    : options_(o),
      ids_(actor_ids(o)),
      listener_(TreeListener::bind(o.listen, {.timeout = channel_timeout(o), .max_trees_in_flight = kTreesInFlight})),
      start_(Clock::now()) {
  write_address(address_path(o.name), listener_.address());
  std::printf("[learner] taking remote actors' channels on %s\n", listener_.address().c_str());
  std::fflush(stdout);
}

std::int64_t ChannelIntake::poll(ReplayBuffer& replay, const RowRules& rules) {
  accept();
  weights_.offer_to(channels_);
  std::int64_t wrong = 0;
  for (std::size_t turn = 0, turns = kMaxPerTurn * channels_.size() + 1; turn < turns; ++turn) {
    const std::optional<ChannelSet::Event> event = channels_.next();
    if (!event) break;
    if (event->tree) {
      wrong += take(event->key, *event->tree, replay, rules);
      continue;
    }
    try {
      std::rethrow_exception(event->ended);
    } catch (const Error& error) {
      end(event->key, std::string(error_kind(error)) + ": " + error.what());
    }
  }
  return wrong;
}

std::int64_t ChannelIntake::trajectories() const {
  std::int64_t total = 0;
  for (const auto& [key, source] : sources_) total += source.trajectories;
  return total;
}

void ChannelIntake::accept() {
  while (std::optional<TreeChannel> fresh = listener_.accept()) {
    const std::string peer = fresh->peer();
    sources_.emplace(channels_.add(std::move(*fresh)), Source{peer});
  }
}

std::int64_t ChannelIntake::take(ChannelSet::Key key, const TensorTree& trajectory, ReplayBuffer& replay,
                                 const RowRules& rules) {
  Source& source = sources_.at(key);
  std::int64_t wrong = 0;
  if (const std::string problem = check(source, trajectory, rules, wrong); !problem.empty()) {
    end(key, problem);
    return wrong;
  }
  replay.extend(trajectory);
  ++source.trajectories;
  return 0;
}

std::string ChannelIntake::check(Source& source, const TensorTree& trajectory, const RowRules& rules,
                                 std::int64_t& wrong) {
  if (trajectory.batch_size().size() != 1 || trajectory.batch_size()[0] != rules.steps) {
    return "a tree that is not one trajectory of " + std::to_string(rules.steps) + " steps";
  }
  if (source.actor < 0) {
    // A channel's actor is the one its first trajectory names; it must be a remote actor's id.
    source.actor = trajectory.get("actor").data<std::int64_t>()[0];
    if (!ids_.remote(source.actor)) {
      ++wrong;
      return "its first trajectory names actor " + std::to_string(source.actor) + ", not a remote actor's id";
    }
    // An actor's first channel starts with its trajectory 0. One that outlived a killed learner goes
    // on from the oldest trajectory it kept for the new learner; on one channel, none is missing.
    source.first = trajectory.get("trajectory").data<std::int64_t>()[0];
    if (source.first < 0 || (!options_.resume && source.first != 0)) {
      ++wrong;
      return "its first trajectory is number " + std::to_string(source.first);
    }
    std::printf("[learner] %5.1f s  remote actor %" PRId64 " (%s) connected, from its trajectory %" PRId64 "\n",
                ms(Clock::now() - start_) / 1000, source.actor, source.peer.c_str(), source.first);
    std::fflush(stdout);
  }
  const std::int64_t number = source.first + source.trajectories;
  wrong = wrong_trajectory_identity(trajectory, source.actor, number) + wrong_row_elements(trajectory, rules);
  return wrong == 0 ? "" : "trajectory " + std::to_string(number) + " has " + std::to_string(wrong) + " wrong elements";
}

void ChannelIntake::end(ChannelSet::Key key, const std::string& why) {
  Source& source = sources_.at(key);
  source.ended = why;
  source.ended_at = Clock::now();
  if (channels_.contains(key)) channels_.remove(key).close();
  std::printf("[learner] %5.1f s  dropped the channel of remote actor %" PRId64 " (%s) after %" PRId64
              " trajectories: %s; carrying on\n",
              ms(source.ended_at - start_) / 1000, source.actor, source.peer.c_str(), source.trajectories,
              why.c_str());
  std::fflush(stdout);
}

bool ChannelIntake::report() const {
  std::printf("  %-26s %14" PRId64 "\n", "trajectories over channels", trajectories());
  for (const auto& [key, source] : sources_) {
    const std::string label = "  remote actor " + std::to_string(source.actor);
    std::printf("  %-26s %14" PRId64 "  %s\n", label.c_str(), source.trajectories,
                source.ended.empty() ? "open at the end" : ("ended: " + source.ended.substr(0, source.ended.find(':'))).c_str());
  }
  std::ifstream note(kill_note_path(options_.name));
  std::int64_t actor = -1;
  std::int64_t killed_ns = 0;
  if (!(note >> actor >> killed_ns)) return true;  // no remote actor was killed
  return report_kill(actor, Clock::time_point(std::chrono::nanoseconds(killed_ns)));
}

bool ChannelIntake::report_kill(std::int64_t actor, Clock::time_point killed_at) const {
  const std::chrono::milliseconds limit = channel_timeout(options_);
  for (const auto& [key, source] : sources_) {
    if (source.actor != actor) continue;
    if (source.ended.empty()) {
      // Still open: a failure only once the timeout has passed since the kill.
      const bool due = Clock::now() - killed_at > limit;
      std::printf("  %-26s %14s  remote actor %" PRId64 " killed %.0f ms before the end\n", "killed actor noticed",
                  due ? "NEVER" : "not yet", actor, ms(Clock::now() - killed_at));
      return !due;
    }
    const double after = ms(source.ended_at - killed_at);
    std::printf("  %-26s %11.1f ms  after the SIGKILL of remote actor %" PRId64 " (%s)\n", "killed actor noticed",
                after, actor, source.ended.substr(0, source.ended.find(':')).c_str());
    return after <= static_cast<double>(limit.count());
  }
  std::printf("  %-26s %14s  remote actor %" PRId64 " was killed before it sent a trajectory\n",
              "killed actor noticed", "-", actor);
  return true;
}

}  // namespace shared_job
