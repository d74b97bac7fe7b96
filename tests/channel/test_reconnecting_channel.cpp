// ReconnectingChannel: an actor (a thread here) outlives its learner (this thread): while no
// learner listens it keeps its newest trees, and once a learner listens at the same address again it
// connects, sends its layout, the kept trees in order, then the rest. Every tree is checked element
// by element (channel_trees.hpp).
#include <latch>
#include <thread>
#include <vector>

#include "channel_learner.hpp"
#include "tensortree/reconnecting_channel.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

ChannelOptions loopback() { return {.plain_loopback = true, .timeout = 5s}; }

ReconnectOptions reconnecting(std::size_t kept) {
  return {.channel = loopback(), .max_kept_trees = kept, .first_retry = 20ms, .max_retry = 100ms, .connect_wait = 1s};
}

// The sequence numbers of the next `count` trees on `channel`, each tree checked as actor 3's.
std::vector<std::int64_t> receive_sequences(TreeChannel& channel, int count) {
  std::vector<std::int64_t> sequences;
  for (int i = 0; i < count; ++i) {
    const TensorTree tree = channel.recv();
    TreeIdentity identity{};
    const std::string problem = check_channel_tree(tree, kRows, &identity);
    INFO(problem);
    REQUIRE(problem.empty());
    REQUIRE(identity.actor == 3);
    sequences.push_back(identity.sequence);
  }
  return sequences;
}

std::vector<std::int64_t> range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> numbers;
  for (std::int64_t n = first; n <= last; ++n) numbers.push_back(n);
  return numbers;
}

}  // namespace

TEST_CASE("an actor keeps its newest trees while its learner is gone, and sends them, in order, to the learner back at its address") {
  std::optional<TreeListener> listener = TreeListener::bind("127.0.0.1:0", loopback());
  const std::string address = listener->address();
  std::latch learner_gone(1);
  std::latch sent_while_gone(1);
  ReconnectStats while_gone{};
  ReconnectStats at_end{};
  bool connected_while_gone = true;
  bool reconnected = false;
  std::thread actor([&] {
    ReconnectingChannel learner(address, reconnecting(4));
    for (std::int64_t sequence = 0; sequence < 5; ++sequence) learner.send(channel_tree(3, sequence, kRows));
    learner_gone.wait();
    std::this_thread::sleep_for(100ms);  // the learner's close has reached this end
    for (std::int64_t sequence = 5; sequence < 15; ++sequence) learner.send(channel_tree(3, sequence, kRows));
    while_gone = learner.stats();
    connected_while_gone = learner.connected();
    sent_while_gone.count_down();
    const Clock::time_point until = Clock::now() + 10s;
    while (!learner.progress() && Clock::now() < until) std::this_thread::sleep_for(5ms);
    reconnected = learner.connected();
    for (std::int64_t sequence = 15; sequence < 20; ++sequence) learner.send(channel_tree(3, sequence, kRows));
    at_end = learner.stats();
  });
  {
    TreeChannel first = accept_one(*listener);
    CHECK(receive_sequences(first, 5) == range(0, 4));
  }
  listener.reset();  // the learner goes: its channel and listener close
  learner_gone.count_down();
  sent_while_gone.wait();
  listener = TreeListener::bind(address, loopback());  // a new learner, at the same address
  TreeChannel second = accept_one(*listener);
  // Trees 5..10 were dropped for newer ones; 11..14 were kept; then 15..19 were sent.
  CHECK(receive_sequences(second, 9) == range(11, 19));
  actor.join();
  CHECK_THROWS_AS(second.recv(), ChannelClosed);  // the actor's channel closed in order at its end
  CHECK_FALSE(connected_while_gone);
  CHECK(while_gone.trees_kept == 4);
  CHECK(while_gone.trees_dropped == 6);
  CHECK(while_gone.losses == 1);
  CHECK(reconnected);
  CHECK(at_end.connections == 2);
  CHECK(at_end.trees_sent == 5 + 4 + 5);
  CHECK(at_end.trees_kept == 0);
  CHECK(second.stats().schemas_received == 1);  // the layout went again on the new channel
}

TEST_CASE("an actor started before its learner keeps its trees and connects once the learner listens") {
  // An address where nothing listens: a port this host just gave out and took back.
  const std::string address = TreeListener::bind("127.0.0.1:0", loopback()).address();
  ReconnectingChannel learner(address, reconnecting(8));
  CHECK_FALSE(learner.connected());
  for (std::int64_t sequence = 0; sequence < 3; ++sequence) learner.send(channel_tree(3, sequence, kRows));
  CHECK_FALSE(learner.take_newest_weights(10ms));  // no learner: act with the weights held
  CHECK(learner.stats().trees_kept == 3);
  TreeListener listener = TreeListener::bind(address, loopback());
  std::optional<TreeChannel> channel;
  std::thread accepting([&] { channel = listener.accept(10s); });
  const Clock::time_point until = Clock::now() + 10s;
  while (!learner.progress() && Clock::now() < until) std::this_thread::sleep_for(5ms);
  accepting.join();
  REQUIRE(channel);
  CHECK(receive_sequences(*channel, 3) == range(0, 2));
  CHECK(learner.stats().trees_kept == 0);
  CHECK(learner.stats().trees_dropped == 0);
}
