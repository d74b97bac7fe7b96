// The learner's side of the channel tests: actor processes (channel_actor) started with fork and
// exec, so that each has UCX to itself, and the channels they open, polled together and checked
// tree by tree (channel_trees.hpp).
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "channel_trees.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree_channel.hpp"

namespace tensortree::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs `command` (a program and its arguments) in a child process that dies with this one.
inline pid_t spawn(const std::vector<std::string>& command) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::vector<char*> argv;
    for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// The channel_actor command line (see channel_actor.cpp for the modes).
inline std::vector<std::string> actor_command(const std::string& address, int actor, const char* mode, int count,
                                              int rows) {
  return {TT_CHANNEL_ACTOR, address, std::to_string(actor), mode, std::to_string(count), std::to_string(rows)};
}

// Where an actor process runs: its command line made into the one that starts it there.
using ActorPlace = std::function<std::vector<std::string>(std::vector<std::string>)>;
// This host, this network namespace.
inline std::vector<std::string> here(std::vector<std::string> command) { return command; }

inline pid_t spawn_actor(const std::string& address, int actor, const char* mode, int count, int rows,
                         const ActorPlace& place = here) {
  return spawn(place(actor_command(address, actor, mode, count, rows)));
}

inline int exit_status(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline TreeChannel accept_one(TreeListener& listener) {
  std::optional<TreeChannel> channel = listener.accept(10s);
  REQUIRE(channel);
  return std::move(*channel);
}

// One channel as the learner sees it: what arrived, and how it ended.
struct Watched {
  TreeChannel channel;
  std::int64_t actor;
  std::int64_t rows;
  std::int64_t trees = 0;
  std::int64_t next_sequence = 0;
  std::string ended;  // "" while open, else the error's type name
  std::string message;
  Clock::time_point ended_at{};

  explicit Watched(TreeChannel ch, std::int64_t actor_id, std::int64_t tree_rows)
      : channel(std::move(ch)), actor(actor_id), rows(tree_rows) {}

  // Takes what arrived within `wait` and checks every element; a channel that fails records how.
  void poll(std::chrono::milliseconds wait) {
    if (!ended.empty()) return;
    try {
      std::optional<TensorTree> tree = channel.try_recv(wait);
      if (!tree) return;
      TreeIdentity identity{};
      const std::string problem = check_channel_tree(*tree, rows, &identity);
      INFO(problem);
      REQUIRE(problem.empty());
      REQUIRE(identity.actor == actor);
      REQUIRE(identity.sequence == next_sequence);
      ++next_sequence;
      ++trees;
    } catch (const ChannelClosed& e) {
      end("ChannelClosed", e.what());
    } catch (const PeerLost& e) {
      end("PeerLost", e.what());
    } catch (const Timeout& e) {
      end("Timeout", e.what());
    } catch (const CorruptData& e) {
      end("CorruptData", e.what());
    } catch (const SchemaMismatch& e) {
      end("SchemaMismatch", e.what());
    }
  }

  void end(const char* type, const char* what) {
    ended = type;
    message = what;
    ended_at = Clock::now();
    REQUIRE_FALSE(channel.is_open());
  }
};

// Polls every channel until `done()` or `limit` passes; false on the limit.
template <class Done>
bool poll_until(std::vector<Watched*> channels, Done&& done, std::chrono::milliseconds limit) {
  const Clock::time_point until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > until) return false;
    for (Watched* watched : channels) watched->poll(2ms);
  }
  return true;
}

// exit_status(pid), polling `channels` meanwhile: what a peer is told (a close) travels only while
// this process progresses UCX.
inline int exit_status_polling(pid_t pid, std::vector<Watched*> channels) {
  int status = 0;
  const Clock::time_point until = Clock::now() + 30s;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < until) {
    for (Watched* watched : channels) watched->poll(2ms);
  }
  REQUIRE(done == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Two streaming actors (placed by `place`) on `listener`; once both channels carry trees, `signal`
// goes to the first. Returns how its channel ended and how long after the signal, having checked
// that the second channel kept receiving while the first ended, and after.
struct Fault {
  std::string ended;
  std::string message;
  Clock::duration noticed_after;
};

inline Fault signal_one_of_two(TreeListener& listener, int signal, int faulty_rows, const ActorPlace& place) {
  const pid_t faulty =
      spawn_actor(listener.address(), 1, "stream", faulty_rows > kRows ? 0 : 2, faulty_rows, place);
  Watched first(accept_one(listener), 1, faulty_rows);
  const pid_t steady = spawn_actor(listener.address(), 2, "stream", 2, kRows, place);
  Watched second(accept_one(listener), 2, kRows);
  REQUIRE(poll_until({&first, &second}, [&] { return first.trees >= 3 && second.trees >= 3; }, 10s));
  ::kill(faulty, signal);
  const Clock::time_point signalled = Clock::now();
  const std::int64_t second_before = second.trees;
  REQUIRE(poll_until({&first, &second}, [&] { return !first.ended.empty(); }, 10s));
  REQUIRE(poll_until({&second}, [&] { return second.trees >= second_before + 20; }, 10s));
  CHECK(second.ended.empty());
  ::kill(faulty, SIGKILL);
  ::kill(steady, SIGKILL);
  CHECK(exit_status(faulty) == 128 + SIGKILL);
  CHECK(exit_status(steady) == 128 + SIGKILL);
  const Fault fault{first.ended, first.message, first.ended_at - signalled};
  // The figure the notes quote (the test's output, with meson test -v).
  std::printf("signal %d to an actor: its channel ended with %s %.1f ms later\n", signal, fault.ended.c_str(),
              std::chrono::duration<double, std::milli>(fault.noticed_after).count());
  return fault;
}

}  // namespace tensortree::test
