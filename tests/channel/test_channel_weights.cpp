// Posted sends and weights over channels: a slow or hung receiver is sent the newest tree and never
// holds the sender up; every connected actor gets every version it can take, a late one the
// current version first; a quiet publisher keeps its actors' channels open. Actors are threads of
// this process, each with a UCX node of its own; every element they receive is checked.
#include <atomic>
#include <memory>
#include <typeinfo>
#include <vector>

#include "channel_learner.hpp"
#include "tensortree/channel_weights.hpp"
#include "thread_actor.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// Parameters whose every element is a function of their version; `big` more elements in a leaf of
// their own make a version large enough that UCX moves it by rendezvous, which a receiver that
// does not progress leaves unfinished.
TensorTree weights_of_version(std::uint64_t version, std::int64_t big = 0) {
  const double base = static_cast<double>(version) * 1000.0;
  TensorTree params = TensorTree::from_map(
      {}, {{"policy.w", Tensor::arange({64, 33}, base, 0.5)},
           {"policy.steps", Tensor::arange({17}, base + 3, 1.0, {.dtype = DType::Int64})},
           {"value.w", Tensor::arange({40}, base - 7, 0.25, {.dtype = DType::Float64})}});
  if (big > 0) params.set("policy.big", Tensor::arange({big}, base + 11, 0.125, {.dtype = DType::Float64}));
  return params;
}

// "" when `params` are version `version`'s, element by element.
std::string check_weights(const TensorTree& params, std::uint64_t version, std::int64_t big = 0) {
  const TensorTree expected = weights_of_version(version, big);
  if (params.keys({.include_nested = true}) != expected.keys({.include_nested = true})) return "the keys differ";
  if (!params.equal(expected)) return fmt::format("version {}: an element differs", version);
  return "";
}

// An actor that takes weights until it has `last`: the versions it saw, each checked.
struct WeightTaker {
  std::int64_t big = 0;  // the versions' size (weights_of_version)
  std::vector<std::uint64_t> versions = {};
  std::string problem = {};

  // Then it keeps its channel until `release`: a channel the learner offers to must be open.
  void take_until(TreeChannel& channel, std::uint64_t last, const std::atomic<bool>* release = nullptr) {
    while (versions.empty() || versions.back() < last) take_one(channel, 20ms);
    while (release && !*release) take_newest_weights(channel, 5ms);
  }

  // Whether a version arrived within `wait`.
  bool take_one(TreeChannel& channel, std::chrono::milliseconds wait) {
    std::optional<ChannelWeights> newest = take_newest_weights(channel, wait);
    if (!newest) return false;
    if (!versions.empty() && newest->version <= versions.back()) problem += " (version went back)";
    problem += check_weights(newest->params, newest->version, big);
    versions.push_back(newest->version);
    return true;
  }
};

// A tree large enough that UCX moves it by rendezvous: the sender's post is not done before the
// receiver takes it.
constexpr std::int64_t kLargeRows = 1 << 15;

}  // namespace

TEST_CASE("post sends a receiver that does not keep up the newest tree, never a queue, and never waits for it") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  std::atomic<bool> go = false;
  std::vector<std::int64_t> received;
  std::string problem;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    while (!go) std::this_thread::sleep_for(1ms);  // not taking anything: UCX is not progressed here
    for (;;) {
      const TensorTree tree = channel.recv();
      TreeIdentity identity{};
      problem += check_channel_tree(tree, kLargeRows, &identity);
      received.push_back(identity.sequence);
      if (identity.sequence == 39) return;
    }
  });
  TreeChannel channel = accept_one(listener);
  Clock::duration longest_post{};
  for (std::int64_t sequence = 0; sequence < 40; ++sequence) {
    const TensorTree tree = channel_tree(0, sequence, kLargeRows);  // made outside the timing
    const Clock::time_point start = Clock::now();
    channel.post(tree);
    longest_post = std::max(longest_post, Clock::now() - start);
  }
  go = true;
  CHECK(channel.flush(10s));
  REQUIRE(actor.join() == "");
  CHECK(problem.empty());
  INFO("received " << received.size() << " of 40 trees");
  REQUIRE(received.size() >= 2);
  CHECK(received.size() < 40);
  CHECK(received.back() == 39);
  CHECK(std::is_sorted(received.begin(), received.end()));
  CHECK(channel.stats().trees_sent == received.size());
  CHECK(channel.stats().schemas_sent == 1);
  // Packing a 1.9 MB tree and handing it over: milliseconds, not the receiver's pace.
  CHECK(longest_post < 500ms);
}

TEST_CASE("weights reach every connected actor, a late one the current version first, every element checked") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  ChannelWeightPublisher weights;
  constexpr std::uint64_t kLast = 30;
  WeightTaker early, late;
  std::atomic<bool> learner_done = false;
  std::unique_ptr<ThreadActor> late_actor;
  std::uint64_t late_connected_at = 0;
  ThreadActor early_actor(listener, [&](TreeChannel& channel) { early.take_until(channel, kLast, &learner_done); });
  std::vector<TreeChannel> channels;
  channels.push_back(accept_one(listener));
  for (std::uint64_t version = 1; version <= kLast; ++version) {
    CHECK(weights.publish(weights_of_version(version)) == version);
    if (version == 12) {
      late_actor = std::make_unique<ThreadActor>(listener, [&](TreeChannel& channel) { late.take_until(channel, kLast, &learner_done); });
      channels.push_back(accept_one(listener));
      late_connected_at = version;
      // The late actor's first version is the one current when it joined: offered until it went,
      // however long the new link takes on a loaded machine, before the next is published.
      const Clock::time_point joined_by = Clock::now() + 10s;
      while (channels.back().stats().trees_sent == 0 && Clock::now() < joined_by) weights.offer_to(channels.back());
    }
    const Clock::time_point turn_ends = Clock::now() + 10ms;
    while (Clock::now() < turn_ends) {
      for (TreeChannel& channel : channels) weights.offer_to(channel);
    }
  }
  for (TreeChannel& channel : channels) CHECK(channel.flush(10s));
  learner_done = true;
  REQUIRE(early_actor.join() == "");
  REQUIRE(late_actor->join() == "");
  CHECK(early.problem.empty());
  CHECK(late.problem.empty());
  CHECK(early.versions.back() == kLast);
  CHECK(late.versions.back() == kLast);
  CHECK(late.versions.front() == late_connected_at);
  CHECK(weights.version() == kLast);
  for (TreeChannel& channel : channels) CHECK(channel.stats().schemas_sent == 1);
}

TEST_CASE("a publisher with nothing new keeps its actors' channels open, and the next version arrives") {
  const ChannelOptions options{.timeout = 600ms};
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  ChannelWeightPublisher weights;
  weights.publish(weights_of_version(1));
  std::atomic<bool> quiet_over = false;
  std::atomic<bool> got_second = false;
  WeightTaker taker;
  std::uint64_t keepalives = 0;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
      taker.take_until(channel, 1);
      // Nothing new for 1.8 s, three timeouts: the channel must stay open meanwhile.
      while (!quiet_over) {
        // The publisher sets quiet_over before it publishes again.
        if (taker.take_one(channel, 50ms) && !quiet_over) taker.problem += " (a version that was not published)";
      }
      taker.take_until(channel, 2);
      keepalives = channel.stats().keepalives_received;
      got_second = true;
    }, options);
  TreeChannel channel = accept_one(listener);
  const Clock::time_point quiet_until = Clock::now() + 1800ms;
  while (Clock::now() < quiet_until) {
    weights.offer_to(channel);
    std::this_thread::sleep_for(5ms);
  }
  quiet_over = true;
  weights.publish(weights_of_version(2));
  // Offered until the actor has it: then the actor closes its end, which offer_to takes quietly.
  const Clock::time_point until = Clock::now() + 5s;
  while (!got_second && Clock::now() < until) {
    weights.offer_to(channel);
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(actor.join() == "");
  CHECK(taker.problem.empty());
  CHECK(taker.versions == std::vector<std::uint64_t>{1, 2});
  CHECK(keepalives >= 3);
}

TEST_CASE("a hung actor ends its channel with Timeout and never holds up the publisher or another actor") {
  constexpr std::int64_t kBig = 1 << 19;  // 4 MiB versions
  const ChannelOptions options{.timeout = 1000ms};
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  ChannelWeightPublisher weights;
  std::atomic<bool> learner_done = false;
  WeightTaker steady{.big = kBig};
  std::string hung_saw;
  ThreadActor hung_actor(listener, [&](TreeChannel& channel) {
      WeightTaker first{.big = kBig};
      first.take_until(channel, 1);
      while (!learner_done) std::this_thread::sleep_for(5ms);  // hung: takes nothing, progresses nothing
      const Clock::time_point until = Clock::now() + 5s;
      try {
        while (Clock::now() < until) take_newest_weights(channel, 100ms);
      } catch (const PeerLost&) {
        hung_saw = "ended";
      } catch (const Timeout&) {
        hung_saw = "ended";
      }
    }, options);
  TreeChannel hung = accept_one(listener);
  ThreadActor steady_actor(listener, [&](TreeChannel& channel) { steady.take_until(channel, 60, &learner_done); }, options);
  TreeChannel healthy = accept_one(listener);
  // Declared after the actors, so gone first: an actor waiting for it is let go on any way out.
  const std::unique_ptr<std::atomic<bool>, void (*)(std::atomic<bool>*)> release_actors(
      &learner_done, [](std::atomic<bool>* done) { *done = true; });
  weights.publish(weights_of_version(1, kBig));
  const Clock::time_point first_by = Clock::now() + 5s;
  do {
    weights.offer_to(hung);
    weights.offer_to(healthy);
  } while (!hung.flush() && Clock::now() < first_by);
  Clock::duration longest_offer{};
  std::optional<Clock::time_point> hung_ended;
  std::string hung_error;
  for (std::uint64_t version = 2; version <= 60; ++version) {
    weights.publish(weights_of_version(version, kBig));
    const Clock::time_point turn_ends = Clock::now() + 40ms;
    while (Clock::now() < turn_ends) {
      const Clock::time_point start = Clock::now();
      weights.offer_to(healthy);
      if (!hung_ended) {
        try {
          weights.offer_to(hung);
          (void)hung.try_recv(0ms);  // offer_to reports nothing: the receiving side tells the silence
        } catch (const Error& e) {
          hung_ended = Clock::now();
          hung_error = fmt::format("{}: {}", typeid(e).name(), e.what());
        }
      }
      longest_offer = std::max(longest_offer, Clock::now() - start);
    }
  }
  CHECK(healthy.flush(10s));
  learner_done = true;
  REQUIRE(steady_actor.join() == "");
  REQUIRE(hung_actor.join() == "");
  INFO(hung_error);
  REQUIRE(hung_ended);
  CHECK_THAT(hung_error, Catch::Contains("Timeout"));
  CHECK_FALSE(hung.is_open());
  CHECK(hung_saw == "ended");
  CHECK(steady.problem.empty());
  CHECK(steady.versions.back() == 60);
  CHECK(longest_offer < 200ms);
}

TEST_CASE("take_newest_weights refuses a tree that is not a weight version") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  std::string saw;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    try {
      take_newest_weights(channel, 5s);
    } catch (const CorruptData& e) {
      saw = e.what();
    }
  });
  TreeChannel channel = accept_one(listener);
  channel.send(channel_tree(1, 0, kRows));
  CHECK_THROWS_AS(channel.recv(), ChannelClosed);  // the actor caught the error and closed in order
  REQUIRE(actor.join() == "");
  CHECK_THAT(saw, Catch::Contains("not a weight version"));
}
