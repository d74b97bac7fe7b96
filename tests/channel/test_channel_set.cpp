// ChannelSet: many channels of one listener served from one wait, in turn; every tree checked
// element by element (channel_trees.hpp), every channel's end reported as an event.
#include <algorithm>
#include <latch>
#include <map>
#include <set>
#include <thread>
#include <typeinfo>
#include <vector>

#include "channel_learner.hpp"
#include "tensortree/channel_set.hpp"
#include "tensortree/channel_weights.hpp"
#include "thread_actor.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

ChannelOptions loopback(std::chrono::milliseconds timeout = 5s) { return {.plain_loopback = true, .timeout = timeout}; }

// What the set gave for one channel: trees checked in order, and how it ended.
struct SetWatch {
  std::map<ChannelSet::Key, std::int64_t> actor_of;
  std::map<ChannelSet::Key, std::int64_t> trees;
  std::map<ChannelSet::Key, std::string> ended;  // the error's message
  std::map<ChannelSet::Key, Clock::time_point> ended_at;
  std::vector<ChannelSet::Key> order;  // keys of the trees, as they came

  void take(const ChannelSet::Event& event, std::int64_t rows) {
    if (event.tree) {
      TreeIdentity identity{};
      const std::string problem = check_channel_tree(*event.tree, rows, &identity);
      INFO(problem);
      REQUIRE(problem.empty());
      REQUIRE(identity.actor == actor_of.at(event.key));
      REQUIRE(identity.sequence == trees[event.key]);
      ++trees[event.key];
      order.push_back(event.key);
      return;
    }
    REQUIRE(event.ended);
    REQUIRE_FALSE(ended.contains(event.key));
    try {
      std::rethrow_exception(event.ended);
    } catch (const Error& e) {
      ended[event.key] = std::string(typeid(e).name()) + ": " + e.what();
    }
    ended_at[event.key] = Clock::now();
  }
};

template <class Error>
bool ended_with(const SetWatch& watch, ChannelSet::Key key) {
  const auto found = watch.ended.find(key);
  return found != watch.ended.end() && found->second.starts_with(typeid(Error).name());
}

}  // namespace

TEST_CASE("a channel set gives the trees of many channels from one wait, one channel a turn, every element checked") {
  constexpr int kActors = 6;
  constexpr int kTrees = 12;
  TreeListener listener = TreeListener::bind("127.0.0.1:0", loopback());
  std::latch sent(kActors);
  std::latch done(1);
  std::vector<std::unique_ptr<ThreadActor>> actors;
  ChannelSet set;
  SetWatch watch;
  for (int actor = 0; actor < kActors; ++actor) {
    actors.push_back(std::make_unique<ThreadActor>(
        listener,
        [&, actor](TreeChannel& channel) {
          for (int sequence = 0; sequence < kTrees; ++sequence) channel.send(channel_tree(actor, sequence, kRows));
          sent.count_down();
          done.wait();
          channel.close();
        },
        loopback()));
    watch.actor_of[set.add(accept_one(listener))] = actor;
  }
  sent.wait();
  std::this_thread::sleep_for(300ms);  // every tree has reached the learner's socket
  while (watch.order.size() < kActors * kTrees) {
    const std::optional<ChannelSet::Event> event = set.next(5s);
    REQUIRE(event);
    watch.take(*event, kRows);
  }
  // With every channel's trees waiting, each run of kActors trees has one from every channel.
  for (std::size_t start = 0; start < watch.order.size(); start += kActors) {
    const std::set<ChannelSet::Key> turn(watch.order.begin() + static_cast<std::ptrdiff_t>(start),
                                         watch.order.begin() + static_cast<std::ptrdiff_t>(start + kActors));
    CHECK(turn.size() == kActors);
  }
  done.count_down();
  // Each actor closes after its trees: every channel ends with ChannelClosed, and leaves the set.
  while (watch.ended.size() < kActors) {
    const std::optional<ChannelSet::Event> event = set.next(5s);
    REQUIRE(event);
    watch.take(*event, kRows);
  }
  for (const auto& [key, actor] : watch.actor_of) {
    INFO(watch.ended[key]);
    CHECK(ended_with<ChannelClosed>(watch, key));
    CHECK(watch.trees[key] == kTrees);
  }
  CHECK(set.size() == 0);
  for (auto& actor : actors) CHECK(actor->join().empty());
}

TEST_CASE("a channel set waits as long as asked when nothing comes, and refuses channels it cannot wait on") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", loopback());
  ChannelSet set;
  CHECK_FALSE(set.next(20ms));  // empty
  std::latch done(1);
  ThreadActor quiet(listener, [&](TreeChannel&) { done.wait(); }, loopback());
  const ChannelSet::Key key = set.add(accept_one(listener));
  CHECK(set.contains(key));
  CHECK(set.added() == 1);
  const Clock::time_point start = Clock::now();
  CHECK_FALSE(set.next(100ms));
  CHECK(Clock::now() - start >= 100ms);

  // A channel that connect made, and one of another listener.
  TreeListener other = TreeListener::bind("127.0.0.1:0", loopback());
  std::optional<TreeChannel> outgoing;
  std::thread connecting([&] { outgoing = TreeChannel::connect(other.address(), loopback()); });
  std::optional<TreeChannel> accepted = other.accept(10s);
  connecting.join();
  REQUIRE(accepted);
  REQUIRE(outgoing);
  CHECK_THROWS_AS(set.add(std::move(*accepted)), InvalidArgument);
  CHECK_THROWS_AS(set.add(std::move(*outgoing)), InvalidArgument);
  CHECK_THROWS_AS(set.channel(key + 1), InvalidArgument);

  // Taken out, a channel is the caller's again; its key is gone.
  TreeChannel mine = set.remove(key);
  CHECK_FALSE(set.contains(key));
  CHECK(mine.is_open());
  done.count_down();
  CHECK(quiet.join().empty());
}

TEST_CASE("in a channel set, a killed actor ends with PeerLost and a hung one with Timeout at its timeout, while another keeps sending") {
  const ChannelOptions options{.timeout = 1000ms};
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  ChannelSet set;
  SetWatch watch;
  std::map<std::int64_t, pid_t> pids;
  std::map<std::int64_t, ChannelSet::Key> key_of;
  for (std::int64_t actor = 1; actor <= 3; ++actor) {
    pids[actor] = spawn_actor(listener.address(), static_cast<int>(actor), "stream", 2, kRows);
    key_of[actor] = set.add(accept_one(listener));
    watch.actor_of[key_of[actor]] = actor;
  }
  // The longest turn: how long next(0) took at most while the others failed.
  Clock::duration longest{};
  const auto turn_until = [&](auto&& done, std::chrono::milliseconds limit) {
    const Clock::time_point until = Clock::now() + limit;
    while (!done()) {
      REQUIRE(Clock::now() < until);
      const Clock::time_point start = Clock::now();
      const std::optional<ChannelSet::Event> event = set.next(0ms);
      longest = std::max(longest, Clock::now() - start);
      if (event) watch.take(*event, kRows);
      else std::this_thread::sleep_for(200us);
    }
  };
  turn_until([&] { return watch.trees[key_of[1]] >= 3 && watch.trees[key_of[2]] >= 3 && watch.trees[key_of[3]] >= 3; },
             10s);
  longest = {};
  ::kill(pids[1], SIGKILL);
  const Clock::time_point killed = Clock::now();
  ::kill(pids[2], SIGSTOP);
  const Clock::time_point stopped = Clock::now();
  const std::int64_t steady_before = watch.trees[key_of[3]];
  turn_until([&] { return watch.ended.size() == 2; }, 10s);
  CHECK(watch.trees[key_of[3]] > steady_before + 20);
  CHECK(set.size() == 1);
  INFO(watch.ended[key_of[1]]);
  INFO(watch.ended[key_of[2]]);
  CHECK(ended_with<PeerLost>(watch, key_of[1]));
  CHECK(ended_with<Timeout>(watch, key_of[2]));
  const auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const double kill_noticed = ms(watch.ended_at[key_of[1]] - killed);
  const double hang_noticed = ms(watch.ended_at[key_of[2]] - stopped);
  // The figures the notes quote (meson test -v); the bounds leave room for a loaded machine.
  std::printf("channel set: SIGKILL noticed after %.1f ms, SIGSTOP after %.1f ms (timeout 1000 ms), longest turn "
              "%.2f ms\n", kill_noticed, hang_noticed, ms(longest));
  CHECK(kill_noticed < 1000);
  // The channel counts silence from the last message it heard, which may come a fraction of a
  // millisecond before the SIGSTOP (a run measured 999.9 ms): 1% of room below the timeout.
  CHECK(hang_noticed >= 990);
  CHECK(hang_noticed < 1500);
  ::kill(pids[2], SIGKILL);
  ::kill(pids[3], SIGKILL);
  for (const auto& [actor, pid] : pids) CHECK(exit_status(pid) == 128 + SIGKILL);
}

TEST_CASE("weights offered to a channel set reach every actor in it, the newest version each") {
  constexpr int kActors = 3;
  TreeListener listener = TreeListener::bind("127.0.0.1:0", loopback());
  ChannelSet set;
  ChannelWeightPublisher weights;
  std::latch done(1);
  std::vector<std::unique_ptr<ThreadActor>> actors;
  for (int actor = 0; actor < kActors; ++actor) {
    actors.push_back(std::make_unique<ThreadActor>(
        listener,
        [&, actor](TreeChannel& channel) {
          std::uint64_t seen = 0;
          while (seen < 2) {
            std::optional<ChannelWeights> newest = take_newest_weights(channel, 100ms);
            if (!newest) continue;
            if (newest->version <= seen) throw std::runtime_error("a version older than one taken before");
            seen = newest->version;
            const std::string problem = check_channel_tree(newest->params, kRows);
            if (!problem.empty()) throw std::runtime_error(problem);
            channel.send(channel_tree(actor, static_cast<std::int64_t>(seen) - 1, kRows));  // a receipt
          }
          done.wait();
        },
        loopback()));
    set.add(accept_one(listener));
  }
  std::map<ChannelSet::Key, std::int64_t> receipts;
  const auto receipts_of = [&](std::int64_t version) {
    const Clock::time_point until = Clock::now() + 10s;
    while (std::count_if(receipts.begin(), receipts.end(), [&](auto& r) { return r.second == version; }) < kActors) {
      REQUIRE(Clock::now() < until);
      weights.offer_to(set);
      if (std::optional<ChannelSet::Event> event = set.next(10ms)) {
        REQUIRE(event->tree);
        TreeIdentity identity{};
        REQUIRE(check_channel_tree(*event->tree, kRows, &identity).empty());
        receipts[event->key] = identity.sequence + 1;
      }
    }
  };
  weights.publish(channel_tree(7, 0, kRows));
  receipts_of(1);
  weights.publish(channel_tree(7, 1, kRows));
  receipts_of(2);
  done.count_down();
  for (auto& actor : actors) CHECK(actor->join().empty());
}
