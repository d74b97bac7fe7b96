// Tree channels between a learner (this process) and actors: threads of this process for the wire
// format, actor processes (channel_actor, started with fork and exec so that each has UCX to
// itself) for failures: killed, hung, hostile, restarted. Every tree received is checked element
// by element (channel_trees.hpp).
#include <thread>

#include "channel_learner.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

ChannelOptions short_timeout() { return {.timeout = 1500ms}; }

}  // namespace

TEST_CASE("a channel carries nested host trees, every element as sent, each layout once") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  std::string actor_error;
  ChannelStats sent;
  std::thread actor([&, address = listener.address()] {
    try {
      TreeChannel channel = TreeChannel::connect(address);
      for (std::int64_t sequence = 0; sequence < 20; ++sequence) channel.send(channel_tree(3, sequence, kRows));
      // A new layout (more rows): announced once before its data.
      for (std::int64_t sequence = 20; sequence < 23; ++sequence) channel.send(channel_tree(3, sequence, 2 * kRows));
      // A consolidated tree goes as it is.
      channel.send(channel_tree(3, 23, 2 * kRows).consolidate());
      sent = channel.stats();
    } catch (const std::exception& e) {
      actor_error = e.what();
    }
  });
  TreeChannel channel = accept_one(listener);
  for (std::int64_t sequence = 0; sequence < 24; ++sequence) {
    const TensorTree tree = channel.recv();
    REQUIRE(tree.is_consolidated());
    TreeIdentity identity{};
    const std::string problem = check_channel_tree(tree, sequence < 20 ? kRows : 2 * kRows, &identity);
    INFO(problem);
    REQUIRE(problem.empty());
    CHECK(identity.actor == 3);
    CHECK(identity.sequence == sequence);
    if (sequence == 19) CHECK(channel.stats().schemas_received == 1);
  }
  // The actor closes its end: this end learns it from its next receive.
  CHECK_THROWS_AS(channel.recv(), PeerLost);
  CHECK_FALSE(channel.is_open());
  actor.join();
  REQUIRE(actor_error.empty());
  CHECK(sent.schemas_sent == 2);
  CHECK(sent.trees_sent == 24);
  CHECK(channel.stats().schemas_received == 2);
  CHECK(channel.stats().trees_received == 24);
}

TEST_CASE("recv_into fills a tree of the sender's layout and refuses another layout, leaving it unchanged") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  std::string actor_error;
  std::thread actor([&, address = listener.address()] {
    try {
      TreeChannel channel = TreeChannel::connect(address);
      channel.send(channel_tree(5, 0, kRows));
      channel.send(channel_tree(5, 1, kRows));
      channel.send(channel_tree(5, 2, kRows));
    } catch (const std::exception& e) {
      actor_error = e.what();
    }
  });
  TreeChannel channel = accept_one(listener);
  TensorTree plain = channel_tree(0, 0, kRows);  // not consolidated: unpacked into its leaves
  channel.recv_into(plain);
  CHECK(check_channel_tree(plain, kRows).empty());
  CHECK(plain.get("meta").data<std::int64_t>()[1] == 0);
  TensorTree packed = channel_tree(0, 0, kRows).consolidate();
  channel.recv_into(packed);
  CHECK(check_channel_tree(packed, kRows).empty());
  CHECK(packed.get("meta").data<std::int64_t>()[1] == 1);
  TensorTree other = channel_tree(0, 0, kRows + 1);
  CHECK_THROWS_AS(channel.recv_into(other), SchemaMismatch);
  CHECK(check_channel_tree(other, kRows + 1).empty());
  CHECK(other.get("meta").data<std::int64_t>()[0] == 0);
  CHECK_THROWS_AS(channel.recv(), PeerLost);
  actor.join();
  REQUIRE(actor_error.empty());
}

TEST_CASE("connect to an address where nothing listens fails with PeerLost or Timeout within the timeout") {
  std::string address;
  {
    TreeListener gone = TreeListener::bind("127.0.0.1:0");
    address = gone.address();
  }
  const Clock::time_point start = Clock::now();
  try {
    TreeChannel::connect(address, {.timeout = 1000ms});
    FAIL("connected to a closed listener");
  } catch (const PeerLost&) {
  } catch (const Timeout&) {
  }
  CHECK(Clock::now() - start < 3s);
}

TEST_CASE("an actor SIGKILLed mid-transfer ends only its channel, within the timeout, while another keeps sending") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", short_timeout());
  const pid_t big = spawn_actor(listener.address(), 1, "stream", 0, 1 << 16);  // trees of about 3.5 MB
  Watched killed(accept_one(listener), 1, 1 << 16);
  const pid_t steady = spawn_actor(listener.address(), 2, "stream", 2, kRows);
  Watched other(accept_one(listener), 2, kRows);
  REQUIRE(poll_until({&killed, &other}, [&] { return killed.trees >= 3 && other.trees >= 3; }, 10s));
  ::kill(big, SIGKILL);
  const Clock::time_point killed_at = Clock::now();
  const std::int64_t other_before = other.trees;
  REQUIRE(poll_until({&killed, &other}, [&] { return !killed.ended.empty(); }, 10s));
  INFO(killed.message);
  CHECK((killed.ended == "PeerLost" || killed.ended == "Timeout"));
  CHECK(killed.ended_at - killed_at < 2500ms);
  // The other channel carries on.
  REQUIRE(poll_until({&other}, [&] { return other.trees >= other_before + 20; }, 10s));
  CHECK(other.ended.empty());
  ::kill(steady, SIGKILL);
  CHECK(exit_status(big) == 128 + SIGKILL);
  CHECK(exit_status(steady) == 128 + SIGKILL);
}

TEST_CASE("a hung actor (SIGSTOP) ends its channel with Timeout within the timeout while another keeps sending") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", short_timeout());
  const pid_t hung = spawn_actor(listener.address(), 1, "stream", 2, kRows);
  Watched stopped(accept_one(listener), 1, kRows);
  const pid_t steady = spawn_actor(listener.address(), 2, "stream", 2, kRows);
  Watched other(accept_one(listener), 2, kRows);
  REQUIRE(poll_until({&stopped, &other}, [&] { return stopped.trees >= 3 && other.trees >= 3; }, 10s));
  ::kill(hung, SIGSTOP);
  const Clock::time_point stopped_at = Clock::now();
  const std::int64_t other_before = other.trees;
  REQUIRE(poll_until({&stopped, &other}, [&] { return !stopped.ended.empty(); }, 10s));
  INFO(stopped.message);
  CHECK(stopped.ended == "Timeout");
  CHECK(stopped.ended_at - stopped_at < 2500ms);
  CHECK(other.trees > other_before);
  REQUIRE(poll_until({&other}, [&] { return other.trees >= other_before + 20; }, 10s));
  CHECK(other.ended.empty());
  ::kill(hung, SIGKILL);
  ::kill(steady, SIGKILL);
  exit_status(hung);
  exit_status(steady);
}

TEST_CASE("an actor sending a hostile frame header ends only its channel with CorruptData") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", short_timeout());
  const pid_t hostile = spawn_actor(listener.address(), 1, "garbage", 0, 0);
  Watched garbage(accept_one(listener), 1, kRows);
  const pid_t steady = spawn_actor(listener.address(), 2, "stream", 2, kRows);
  Watched other(accept_one(listener), 2, kRows);
  REQUIRE(poll_until({&garbage, &other}, [&] { return !garbage.ended.empty() && other.trees >= 10; }, 10s));
  INFO(garbage.message);
  CHECK(garbage.ended == "CorruptData");
  CHECK(garbage.trees == 0);
  // The hostile actor saw its connection cut.
  CHECK(exit_status(hostile) == 0);
  const std::int64_t other_before = other.trees;
  REQUIRE(poll_until({&other}, [&] { return other.trees >= other_before + 10; }, 10s));
  CHECK(other.ended.empty());
  ::kill(steady, SIGKILL);
  exit_status(steady);
}

TEST_CASE("an actor restarted after a kill connects again and starts with its layout") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", short_timeout());
  const pid_t first = spawn_actor(listener.address(), 4, "stream", 1, kRows);
  Watched before(accept_one(listener), 4, kRows);
  REQUIRE(poll_until({&before}, [&] { return before.trees >= 3; }, 10s));
  ::kill(first, SIGKILL);
  CHECK(exit_status(first) == 128 + SIGKILL);
  REQUIRE(poll_until({&before}, [&] { return !before.ended.empty(); }, 10s));
  const pid_t again = spawn_actor(listener.address(), 4, "send", 30, kRows);
  Watched after(accept_one(listener), 4, kRows);
  // It closes its end after its last tree.
  REQUIRE(poll_until({&after}, [&] { return !after.ended.empty(); }, 10s));
  CHECK(after.ended == "PeerLost");
  CHECK(after.trees == 30);
  CHECK(after.channel.stats().schemas_received == 1);
  CHECK(after.channel.stats().trees_received == 30);
  CHECK(exit_status(again) == 0);
}
