// Tree channels between two "nodes" on one machine: the learner (this process) in this network
// namespace, actors in another, joined by a veth pair, with UCX held to TCP over that pair (as
// between hosts). netns_main.cpp skips (77) where namespaces cannot be made.
#include <stdlib.h>

#include <memory>
#include <string>

#include "channel_learner.hpp"
#include "other_node.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// Another node, and this side's UCX held to TCP on the veth too (a listener's context reads these
// when it is made).
std::unique_ptr<tools::OtherNode> other_node() {
  std::string why;
  std::unique_ptr<tools::OtherNode> node = tools::OtherNode::make(why);
  INFO(why);
  REQUIRE(node);
  ::setenv("UCX_TLS", "tcp", 1);
  ::setenv("UCX_NET_DEVICES", node->here_device().c_str(), 1);
  return node;
}

ActorPlace inside(const tools::OtherNode& node) {
  return [&node](std::vector<std::string> command) { return node.inside(std::move(command)); };
}

}  // namespace

TEST_CASE("actors on another node (a network namespace, TCP over a veth pair) send trees the learner checks") {
  const std::unique_ptr<tools::OtherNode> node = other_node();
  TreeListener listener = TreeListener::bind(node->here_ip() + ":0", {.timeout = 3000ms});
  const std::string address = listener.address();
  CHECK(address.starts_with(node->here_ip() + ":"));
  const pid_t small = spawn(node->inside(actor_command(address, 1, "send", 40, kRows)));
  Watched many(accept_one(listener), 1, kRows);
  const pid_t large = spawn(node->inside(actor_command(address, 2, "send", 4, 1 << 15)));  // about 1.7 MB each
  Watched big(accept_one(listener), 2, 1 << 15);
  // Both came over the veth, from the other namespace's address.
  CHECK(many.channel.peer().starts_with(node->there_ip() + ":"));
  CHECK(big.channel.peer().starts_with(node->there_ip() + ":"));
  // Each closes its end after its last tree.
  REQUIRE(poll_until({&many, &big}, [&] { return !many.ended.empty() && !big.ended.empty(); }, 20s));
  INFO(many.message + " / " + big.message);
  CHECK(many.trees == 40);
  CHECK(big.trees == 4);
  CHECK(many.ended == "ChannelClosed");
  CHECK(big.ended == "ChannelClosed");
  CHECK(many.channel.stats().schemas_received == 1);
  CHECK(exit_status(small) == 0);
  CHECK(exit_status(large) == 0);
}

// The fault matrix across the namespaces: each fault ends only its own channel, with the error and
// within the time the localhost tests expect, while another actor's channel keeps receiving.
TEST_CASE("across the namespaces, a killed, a hung and a hostile actor end only their channels; a restarted one reconnects") {
  const std::unique_ptr<tools::OtherNode> node = other_node();
  // The window bounds how many trees a killed actor left that the learner takes before it learns.
  TreeListener listener = TreeListener::bind(node->here_ip() + ":0", {.timeout = 1500ms, .max_bytes_in_flight = 8 << 20});
  SECTION("killed mid-transfer") {
    const Fault fault = signal_one_of_two(listener, SIGKILL, 1 << 16, inside(*node));
    INFO(fault.message);
    CHECK((fault.ended == "PeerLost" || fault.ended == "Timeout"));
    CHECK(fault.noticed_after < 2500ms);
  }
  SECTION("hung (SIGSTOP)") {
    const Fault fault = signal_one_of_two(listener, SIGSTOP, kRows, inside(*node));
    INFO(fault.message);
    CHECK(fault.ended == "Timeout");
    CHECK(fault.noticed_after < 2500ms);
  }
  SECTION("hostile bytes, then a restart after a kill") {
    const pid_t steady = spawn_actor(listener.address(), 2, "stream", 2, kRows, inside(*node));
    Watched other(accept_one(listener), 2, kRows);
    const pid_t hostile = spawn_actor(listener.address(), 1, "hostile:garbage", 0, 0, inside(*node));
    Watched garbage(accept_one(listener), 1, kRows);
    REQUIRE(poll_until({&garbage, &other}, [&] { return !garbage.ended.empty(); }, 10s));
    CHECK(garbage.ended == "CorruptData");
    CHECK(exit_status_polling(hostile, {&other}) == 0);
    const pid_t first = spawn_actor(listener.address(), 4, "stream", 1, kRows, inside(*node));
    Watched before(accept_one(listener), 4, kRows);
    REQUIRE(poll_until({&before, &other}, [&] { return before.trees >= 3; }, 10s));
    ::kill(first, SIGKILL);
    CHECK(exit_status(first) == 128 + SIGKILL);
    REQUIRE(poll_until({&before, &other}, [&] { return !before.ended.empty(); }, 10s));
    const pid_t again = spawn_actor(listener.address(), 4, "send", 30, kRows, inside(*node));
    Watched after(accept_one(listener), 4, kRows);
    REQUIRE(poll_until({&after, &other}, [&] { return !after.ended.empty(); }, 10s));
    CHECK(after.trees == 30);
    CHECK(after.channel.stats().schemas_received == 1);
    CHECK(exit_status(again) == 0);
    const std::int64_t other_before = other.trees;
    REQUIRE(poll_until({&other}, [&] { return other.trees > other_before + 10; }, 10s));
    CHECK(other.ended.empty());
    ::kill(steady, SIGKILL);
    exit_status(steady);
  }
}
