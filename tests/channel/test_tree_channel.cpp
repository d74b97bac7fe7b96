// Tree channels between a learner (this process) and actors: threads of this process for the wire
// format, actor processes (channel_actor, started with fork and exec so that each has UCX to
// itself) for failures: killed, hung, hostile, restarted. Every tree received is checked element
// by element (channel_trees.hpp).
#include <dirent.h>

#include <atomic>
#include <fstream>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include "channel_learner.hpp"
#include "thread_actor.hpp"
#include "tensortree/replay_buffer.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// A learner takes the trees that arrived before an actor died before it learns of the death, so
// the window (here two of the 3.5 MB trees the killed actors send) bounds how late it learns it.
ChannelOptions short_timeout() { return {.timeout = 1500ms, .max_bytes_in_flight = 8 << 20}; }

int open_descriptors() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  REQUIRE(dir);
  while (::readdir(dir)) ++count;
  ::closedir(dir);
  return count;
}

int mappings() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) ++count;
  return count;
}

}  // namespace

TEST_CASE("a channel carries nested host trees, every element as sent, each layout once") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  ChannelStats sent;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    for (std::int64_t sequence = 0; sequence < 20; ++sequence) channel.send(channel_tree(3, sequence, kRows));
    // A new layout (more rows): announced once before its data.
    for (std::int64_t sequence = 20; sequence < 23; ++sequence) channel.send(channel_tree(3, sequence, 2 * kRows));
    // A consolidated tree goes as it is.
    channel.send(channel_tree(3, 23, 2 * kRows).consolidate());
    sent = channel.stats();
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
  // The actor closes its end, in order: this end learns it from its next receive.
  CHECK_THROWS_AS(channel.recv(), ChannelClosed);
  CHECK_FALSE(channel.is_open());
  REQUIRE(actor.join().empty());
  CHECK(sent.schemas_sent == 2);
  CHECK(sent.trees_sent == 24);
  CHECK(channel.stats().schemas_received == 2);
  CHECK(channel.stats().trees_received == 24);
}

TEST_CASE("trees recv() returned keep their values while later trees arrive, across a change of layout") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    for (std::int64_t sequence = 0; sequence < 10; ++sequence) channel.send(channel_tree(4, sequence, kRows));
    for (std::int64_t sequence = 10; sequence < 14; ++sequence) channel.send(channel_tree(4, sequence, 2 * kRows));
  });
  TreeChannel channel = accept_one(listener);
  // All kept at once: each must view its own buffer, whatever the channel built it from.
  std::vector<TensorTree> kept;
  for (std::int64_t sequence = 0; sequence < 14; ++sequence) kept.push_back(channel.recv());
  REQUIRE(actor.join().empty());
  for (std::int64_t sequence = 0; sequence < 14; ++sequence) {
    const TensorTree& tree = kept[static_cast<std::size_t>(sequence)];
    REQUIRE(tree.is_consolidated());
    TreeIdentity identity{};
    const std::string problem = check_channel_tree(tree, sequence < 10 ? kRows : 2 * kRows, &identity);
    INFO(sequence << ": " << problem);
    REQUIRE(problem.empty());
    CHECK(identity.sequence == sequence);
  }
}

TEST_CASE("recv_into fills a tree of the sender's layout and refuses another layout, leaving it unchanged") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  ThreadActor actor(listener, [](TreeChannel& channel) {
    for (std::int64_t sequence = 0; sequence < 3; ++sequence) channel.send(channel_tree(5, sequence, kRows));
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
  std::string refusal;
  try {
    channel.recv_into(other);
  } catch (const SchemaMismatch& error) {
    refusal = error.what();
  }
  INFO(refusal);
  // The key, not two fingerprints: every leaf has one row more here than there.
  const auto named = refusal.find("at key '");
  REQUIRE(named != std::string::npos);
  CHECK(refusal.find("[" + std::to_string(kRows), named) != std::string::npos);
  CHECK(refusal.find("[" + std::to_string(kRows + 1), named) != std::string::npos);
  CHECK(refusal.find("the tree that came is dropped") != std::string::npos);
  CHECK(check_channel_tree(other, kRows + 1).empty());
  CHECK(other.get("meta").data<std::int64_t>()[0] == 0);
  CHECK_THROWS_AS(channel.recv(), ChannelClosed);
  REQUIRE(actor.join().empty());
}

TEST_CASE("a channel carries trees both ways: the learner's to the actor, the actor's back") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  std::string actor_problem;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    for (std::int64_t sequence = 0; sequence < 5; ++sequence) {
      const TensorTree weights = channel.recv();
      TreeIdentity identity{};
      actor_problem += check_channel_tree(weights, 2 * kRows, &identity);
      if (identity.actor != 0 || identity.sequence != sequence) actor_problem += " (wrong tree)";
      channel.send(channel_tree(7, sequence, kRows));
    }
  });
  TreeChannel channel = accept_one(listener);
  for (std::int64_t sequence = 0; sequence < 5; ++sequence) {
    channel.send(channel_tree(0, sequence, 2 * kRows));
    TreeIdentity identity{};
    CHECK(check_channel_tree(channel.recv(), kRows, &identity).empty());
    CHECK(identity.actor == 7);
    CHECK(identity.sequence == sequence);
  }
  CHECK_THROWS_AS(channel.recv(), ChannelClosed);
  CHECK(actor.join().empty());
  CHECK(actor_problem.empty());
  CHECK(channel.stats().schemas_sent == 1);
  CHECK(channel.stats().schemas_received == 1);
}

TEST_CASE("keepalives hold a quiet sender's channel open, and a receiver back after the timeout takes what arrived") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", {.timeout = 800ms});
  std::uint64_t keepalives_sent = 0;
  std::atomic<bool> sent_first = false;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    channel.send(channel_tree(6, 0, kRows));
    sent_first = true;
    for (int i = 0; i < 8; ++i) {  // quiet for 1.2 s, longer than the receiver's timeout
      std::this_thread::sleep_for(150ms);
      channel.keepalive();
    }
    channel.send(channel_tree(6, 1, kRows));
    keepalives_sent = channel.stats().keepalives_sent;
  });
  TreeChannel channel = accept_one(listener);
  // UCX progresses (the connection completes, the first tree comes in) without this end taking it.
  while (!sent_first) (void)listener.accept(1ms);
  (void)listener.accept(100ms);
  std::this_thread::sleep_for(1000ms);  // away for longer than the timeout: the tree waits
  std::optional<TensorTree> first = channel.try_recv(0ms);
  REQUIRE(first);
  CHECK(check_channel_tree(*first, kRows).empty());
  const TensorTree second = channel.recv();
  TreeIdentity identity{};
  CHECK(check_channel_tree(second, kRows, &identity).empty());
  CHECK(identity.sequence == 1);
  CHECK(channel.stats().keepalives_received >= 4);
  CHECK_THROWS_AS(channel.recv(), ChannelClosed);
  REQUIRE(actor.join().empty());
  CHECK(keepalives_sent == 8);
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
  const Fault fault = signal_one_of_two(listener, SIGKILL, 1 << 16, here);  // trees of about 3.5 MB
  INFO(fault.message);
  CHECK((fault.ended == "PeerLost" || fault.ended == "Timeout"));
  CHECK(fault.noticed_after < 2500ms);
}

// The learner reads nothing while an actor streams, so the engine's queue for it fills and it stops
// reading that connection; then the actor dies, and the learner reads nothing for a while more. In
// libzmq 4.3.4 its heartbeat timer then wrote to the broken connection and aborted the learner
// (stream_engine_base.cpp:331); the channel must end with the trees that arrived whole, then PeerLost.
TEST_CASE("an actor SIGKILLed while the learner reads nothing ends its channel after its whole trees; the learner lives") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", short_timeout());
  const pid_t actor = spawn_actor(listener.address(), 1, "stream", 0, 1 << 16);  // trees of about 3.5 MB
  Watched watched(accept_one(listener), 1, 1 << 16);
  REQUIRE(poll_until({&watched}, [&] { return watched.trees >= 1; }, 10s));
  std::this_thread::sleep_for(500ms);  // the actor fills what the learner takes in
  ::kill(actor, SIGKILL);
  CHECK(exit_status(actor) == 128 + SIGKILL);
  std::this_thread::sleep_for(1200ms);  // longer than the channel's timeout / 4
  REQUIRE(poll_until({&watched}, [&] { return !watched.ended.empty(); }, 10s));
  INFO(watched.message);
  CHECK((watched.ended == "PeerLost" || watched.ended == "Timeout"));
  CHECK(watched.trees >= 2);
}

TEST_CASE("a hung actor (SIGSTOP) ends its channel with Timeout within the timeout while another keeps sending") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", short_timeout());
  const Fault fault = signal_one_of_two(listener, SIGSTOP, kRows, here);
  INFO(fault.message);
  CHECK(fault.ended == "Timeout");
  CHECK(fault.noticed_after < 2500ms);
}

TEST_CASE("actors sending hostile messages end only their channels with a typed error, nothing allocated for them") {
  ChannelOptions options = short_timeout();
  options.max_tree_bytes = 1 << 20;
  TreeListener listener = TreeListener::bind("127.0.0.1:0", options);
  const pid_t steady = spawn_actor(listener.address(), 2, "stream", 2, kRows);
  Watched other(accept_one(listener), 2, kRows);
  const std::pair<const char*, const char*> cases[] = {
      {"hostile:garbage", "CorruptData"},      {"hostile:early-data", "CorruptData"},
      {"hostile:bad-schema", "CorruptData"},   {"hostile:out-of-order", "CorruptData"},
      {"hostile:too-large", "CorruptData"},    {"hostile:wrong-fingerprint", "SchemaMismatch"},
  };
  for (const auto& [mode, expected] : cases) {
    INFO(mode);
    const std::int64_t other_before = other.trees;
    const pid_t hostile = spawn_actor(listener.address(), 1, mode, 0, 0);
    Watched garbage(accept_one(listener), 1, kRows);
    REQUIRE(poll_until({&garbage, &other}, [&] { return !garbage.ended.empty(); }, 10s));
    INFO(garbage.message);
    CHECK(garbage.ended == expected);
    CHECK(garbage.trees == 0);
    CHECK(exit_status_polling(hostile, {&other}) == 0);  // it saw its connection cut
    REQUIRE(poll_until({&other}, [&] { return other.trees > other_before; }, 10s));
  }
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
  CHECK(after.ended == "ChannelClosed");
  CHECK(after.trees == 30);
  CHECK(after.channel.stats().schemas_received == 1);
  CHECK(after.channel.stats().trees_received == 30);
  CHECK(exit_status(again) == 0);
}

TEST_CASE("100 cycles of connect, send and disconnect leave the learner no more descriptors or mappings") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  const auto cycle = [&](std::int64_t sequence) {
    ThreadActor actor(listener, [&](TreeChannel& channel) { channel.send(channel_tree(8, sequence, kRows)); });
    TreeChannel channel = accept_one(listener);
    const TensorTree tree = channel.recv();
    CHECK(check_channel_tree(tree, kRows).empty());
    CHECK_THROWS_AS(channel.recv(), ChannelClosed);  // the actor closed its end
    REQUIRE(actor.join().empty());
  };
  for (std::int64_t warmup = 0; warmup < 5; ++warmup) cycle(warmup);
  const int descriptors = open_descriptors();
  const int maps = mappings();
  const Clock::time_point start = Clock::now();
  for (std::int64_t sequence = 0; sequence < 100; ++sequence) cycle(sequence);
  INFO("100 cycles took " << std::chrono::duration<double>(Clock::now() - start).count() << " s");
  // The last actor's connection goes once ZeroMQ's I/O thread has seen it close (on a loaded
  // machine, after this thread took its close frame).
  const Clock::time_point settled_by = Clock::now() + 2s;
  while (open_descriptors() > descriptors && Clock::now() < settled_by) CHECK_FALSE(listener.accept(10ms));
  CHECK(open_descriptors() <= descriptors);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator maps its regions as it goes, and LeakSanitizer checks memory.
  (void)maps;
#else
  CHECK(mappings() <= maps + 8);  // malloc may add an arena for a new thread
#endif
}

TEST_CASE("trees from actor processes go into the learner's replay buffer, every sampled row whole") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tt-channel-replay-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    ReplayBuffer replay = ReplayBuffer::create(dir, {.capacity = 4096});
    TreeListener listener = TreeListener::bind("127.0.0.1:0", short_timeout());
    const pid_t first = spawn_actor(listener.address(), 1, "send", 40, kRows);
    const pid_t second = spawn_actor(listener.address(), 2, "send", 40, kRows);
    std::vector<TreeChannel> channels;
    channels.push_back(accept_one(listener));
    channels.push_back(accept_one(listener));
    std::int64_t trees = 0;
    std::vector<bool> open(channels.size(), true);
    const Clock::time_point until = Clock::now() + 20s;
    while ((open[0] || open[1]) && Clock::now() < until) {
      for (std::size_t c = 0; c < channels.size(); ++c) {
        if (!open[c]) continue;
        try {
          if (std::optional<TensorTree> tree = channels[c].try_recv(2ms)) {
            replay.extend(*tree);
            ++trees;
          }
        } catch (const ChannelClosed&) {
          open[c] = false;  // the actor sent its trees and closed
        }
      }
    }
    CHECK(trees == 80);
    CHECK(exit_status(first) == 0);
    CHECK(exit_status(second) == 0);
    const ReplaySample sample = replay.sample(512);
    std::set<std::int64_t> actors;
    for (std::int64_t i = 0; i < 512; ++i) {
      const std::string problem = check_channel_row(sample.batch, i);
      INFO(problem);
      REQUIRE(problem.empty());
      actors.insert(sample.batch.get("meta").select(0, i).data<std::int64_t>()[0]);
    }
    CHECK(actors == std::set<std::int64_t>{1, 2});
  }
  std::filesystem::remove_all(dir);
}
