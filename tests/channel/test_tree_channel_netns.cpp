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

TEST_CASE("actors on another node (a network namespace, TCP over a veth pair) send trees the learner checks") {
  std::string why;
  const std::unique_ptr<tools::OtherNode> node = tools::OtherNode::make(why);
  INFO(why);
  REQUIRE(node);
  // This side's UCX on the veth too, TCP only: the listener's context reads these when made.
  ::setenv("UCX_TLS", "tcp", 1);
  ::setenv("UCX_NET_DEVICES", node->here_device().c_str(), 1);
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
  CHECK(many.ended == "PeerLost");
  CHECK(big.ended == "PeerLost");
  CHECK(many.channel.stats().schemas_received == 1);
  CHECK(exit_status(small) == 0);
  CHECK(exit_status(large) == 0);
}
