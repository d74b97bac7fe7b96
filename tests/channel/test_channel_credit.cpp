// What bounds a channel's memory and what ends it in order: the receiver's credit (a sender waits
// for it; a peer that ignores it is cut off), newest-only weights at an actor that takes none, and
// close(), which delivers everything sent before it and ends the learner's side with
// ChannelClosed, never PeerLost. Every tree received is checked element by element.
#include <atomic>
#include <thread>
#include <vector>

#include "channel_learner.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/channel_weights.hpp"
#include "thread_actor.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// Sends trees 0, 1, ... of `rows` rows until `count` went or a send fails; `sent` counts those
// that returned.
void send_trees(TreeChannel& channel, std::int64_t actor, std::int64_t rows, std::int64_t count,
                std::atomic<std::int64_t>& sent) {
  for (std::int64_t i = 0; i < count; ++i) {
    channel.send(channel_tree(actor, i, rows));
    ++sent;
  }
}

// Takes `count` trees of `actor` in order, checking each.
void take_trees(TreeChannel& channel, std::int64_t actor, std::int64_t rows, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    const TensorTree tree = channel.recv();
    TreeIdentity identity{};
    const std::string problem = check_channel_tree(tree, rows, &identity);
    INFO(problem);
    REQUIRE(problem.empty());
    REQUIRE(identity.actor == actor);
    REQUIRE(identity.sequence == i);
  }
}

}  // namespace

// An actor sends `count` trees of `rows` rows to a learner with `options` that takes none for
// 400 ms, then all: returns how many sends had returned by then, having checked every tree.
std::int64_t sent_before_the_learner_takes(const ChannelOptions& options, std::int64_t rows, std::int64_t count) {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  std::atomic<std::int64_t> sent = 0;
  ThreadActor actor(listener, [&](TreeChannel& channel) { send_trees(channel, 1, rows, count, sent); });
  TreeChannel channel = accept_one(listener);
  std::this_thread::sleep_for(400ms);
  const std::int64_t before = sent;
  take_trees(channel, 1, rows, count);
  CHECK(actor.join() == "");
  CHECK(sent == count);
  return before;
}

TEST_CASE("a sender waits for the receiver's credit: no more trees in flight than its window, then all of them") {
  CHECK(sent_before_the_learner_takes({.timeout = 3000ms, .max_trees_in_flight = 4}, kRows, 40) == 4);
}

TEST_CASE("the byte window holds a sender to what it covers, and one tree larger than it goes alone") {
  const std::int64_t rows = 1 << 13;  // some 300 KB a tree
  const std::uint64_t message_bytes = channel_tree(1, 0, rows).consolidate().schema()->total_bytes() + kWireHeaderBytes;
  CHECK(sent_before_the_learner_takes({.timeout = 3000ms, .max_bytes_in_flight = 2 * message_bytes}, rows, 10) == 2);
  CHECK(sent_before_the_learner_takes({.timeout = 3000ms, .max_bytes_in_flight = 1000}, rows, 5) == 1);
}

TEST_CASE("a sender whose receiver takes nothing ends with Timeout after its timeout, having sent its window") {
  const ChannelOptions options{.timeout = 600ms, .max_trees_in_flight = 3};
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  std::atomic<std::int64_t> sent = 0;
  std::atomic<bool> done = false;
  std::string error;
  Clock::duration waited{};
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    const Clock::time_point start = Clock::now();
    try {
      send_trees(channel, 1, kRows, 10, sent);
    } catch (const Timeout& e) {
      error = e.what();
    }
    waited = Clock::now() - start;
    done = true;
  }, options);
  TreeChannel channel = accept_one(listener);
  while (!done) std::this_thread::sleep_for(5ms);  // the learner takes nothing
  CHECK(actor.join() == "");
  INFO(error);
  CHECK(error.find("granted no credit") != std::string::npos);
  CHECK(sent == 3);
  CHECK(waited >= 600ms);
  CHECK(waited < 2000ms);
}

TEST_CASE("a peer sending beyond its credit ends its channel with CorruptData; a steady actor goes on") {
  ChannelOptions options{.timeout = 3000ms, .max_trees_in_flight = 2};
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  const pid_t steady = spawn_actor(listener.address(), 2, "stream", 2, kRows);
  Watched other(accept_one(listener), 2, kRows);
  const pid_t hostile = spawn_actor(listener.address(), 1, "hostile:beyond-credit", 0, 0);
  Watched flooding(accept_one(listener), 9, kRows);  // its trees are channel_tree(9, ...)
  REQUIRE(poll_until({&flooding, &other}, [&] { return !flooding.ended.empty(); }, 10s));
  INFO(flooding.message);
  CHECK(flooding.ended == "CorruptData");
  CHECK(flooding.message.find("beyond its credit") != std::string::npos);
  CHECK(exit_status_polling(hostile, {&other}) == 0);
  const std::int64_t before = other.trees;
  REQUIRE(poll_until({&other}, [&] { return other.trees > before + 5; }, 10s));
  CHECK(other.ended.empty());
  ::kill(steady, SIGKILL);
  CHECK(exit_status(steady) == 128 + SIGKILL);
}

TEST_CASE("close() delivers every tree sent before it, and the learner sees ChannelClosed, never PeerLost") {
  // The learner loop the README shows: offer the weights, then take what arrived.
  constexpr int kActors = 6;
  constexpr std::int64_t kTrees = 120;
  constexpr std::int64_t kCloseRows = 1 << 11;  // some 75 KB a tree
  const ChannelOptions options{.timeout = 5000ms, .max_trees_in_flight = 8};
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  ChannelWeightPublisher weights;
  weights.publish(TensorTree::from_map({}, {{"w", Tensor::full({16}, 1.5, {.dtype = DType::Float32})}}));
  std::vector<std::unique_ptr<ThreadActor>> actors;
  std::vector<std::atomic<std::int64_t>> sent(kActors);
  for (int a = 0; a < kActors; ++a) {
    actors.push_back(std::make_unique<ThreadActor>(listener, [&, a](TreeChannel& channel) {
      send_trees(channel, a, kCloseRows, kTrees, sent[a]);
      channel.close();
    }, options));
  }
  std::vector<Watched> channels;
  for (int a = 0; a < kActors; ++a) channels.emplace_back(accept_one(listener), -1, kCloseRows);
  std::vector<std::string> ended(kActors);
  std::vector<std::int64_t> trees(kActors, 0);
  const Clock::time_point until = Clock::now() + 60s;
  int open = kActors;
  while (open > 0 && Clock::now() < until) {
    for (int c = 0; c < kActors; ++c) {
      if (!ended[c].empty()) continue;
      weights.offer_to(channels[c].channel);
      try {
        if (std::optional<TensorTree> tree = channels[c].channel.try_recv(1ms)) {
          const std::string problem = check_channel_tree(*tree, kCloseRows);
          INFO(problem);
          REQUIRE(problem.empty());
          ++trees[c];
        }
      } catch (const ChannelClosed&) {
        ended[c] = "ChannelClosed";
        --open;
      } catch (const Error& e) {
        ended[c] = e.what();
        --open;
      }
    }
  }
  for (auto& actor : actors) CHECK(actor->join() == "");
  for (int c = 0; c < kActors; ++c) {
    CHECK(ended[c] == "ChannelClosed");
    CHECK(trees[c] == kTrees);
    CHECK_FALSE(channels[c].channel.is_open());
  }
}

TEST_CASE("an actor that takes no weights holds at most one unread version; then it gets the newest") {
  const ChannelOptions options{.timeout = 3000ms};
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  ChannelWeightPublisher weights;
  std::atomic<bool> take = false;
  std::atomic<bool> took = false;
  std::vector<std::uint64_t> versions;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    while (!take) std::this_thread::sleep_for(1ms);  // takes nothing meanwhile
    for (;;) {
      if (std::optional<ChannelWeights> newest = take_newest_weights(channel, 20ms)) {
        versions.push_back(newest->version);
        if (newest->version == 20) break;
      }
    }
    took = true;
  }, options);
  TreeChannel channel = accept_one(listener);
  for (std::uint64_t version = 1; version <= 20; ++version) {
    weights.publish(TensorTree::from_map({}, {{"w", Tensor::full({1 << 16}, static_cast<double>(version),
                                                                 {.dtype = DType::Float32})}}));
    for (int turn = 0; turn < 10; ++turn) {
      weights.offer_to(channel);
      std::this_thread::sleep_for(2ms);
    }
  }
  CHECK(channel.stats().trees_sent == 1);  // the first version went; the others waited for it to be taken
  take = true;
  const Clock::time_point until = Clock::now() + 10s;
  while (!took && Clock::now() < until) weights.offer_to(channel);
  CHECK(actor.join() == "");
  CHECK(versions == std::vector<std::uint64_t>{1, 20});
  CHECK(channel.stats().trees_sent == 2);
}
