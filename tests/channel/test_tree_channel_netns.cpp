// Tree channels between two "nodes" on one machine: the learner (this process) in this network
// namespace, actors in another, joined by a veth pair, with UCX held to TCP over that pair (as
// between hosts). netns_main.cpp skips (77) where namespaces cannot be made.
#include <stdlib.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "channel_learner.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// Runs a shell command; false when it fails.
bool run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// Another node: a network namespace joined to this one by a veth pair, 10.213.K.1 here and
// 10.213.K.2 there. Removed with everything in it when the test ends.
class OtherNode {
 public:
  OtherNode() {
    const int id = static_cast<int>(::getpid() % 100000);
    name_ = fmt::format("tt_node_{}", id);
    here_device_ = fmt::format("ttv{}a", id);
    there_device_ = fmt::format("ttv{}b", id);
    const int subnet = 1 + id % 250;
    here_ip_ = fmt::format("10.213.{}.1", subnet);
    there_ip_ = fmt::format("10.213.{}.2", subnet);
    const std::string in_there = "ip netns exec " + name_ + " ";
    for (const std::string& step : {
             "ip netns add " + name_,
             fmt::format("ip link add {} type veth peer name {}", here_device_, there_device_),
             fmt::format("ip link set {} netns {}", there_device_, name_),
             fmt::format("ip addr add {}/24 dev {}", here_ip_, here_device_),
             fmt::format("ip link set {} up", here_device_),
             in_there + fmt::format("ip addr add {}/24 dev {}", there_ip_, there_device_),
             in_there + fmt::format("ip link set {} up", there_device_),
             in_there + "ip link set lo up",
         }) {
      INFO(step);
      REQUIRE(run(step));
    }
  }
  ~OtherNode() {
    run("ip link del " + here_device_);
    run("ip netns del " + name_);
  }
  OtherNode(const OtherNode&) = delete;
  OtherNode& operator=(const OtherNode&) = delete;

  // `command` run inside the namespace, its UCX held to TCP over the veth.
  std::vector<std::string> inside(std::vector<std::string> command) const {
    std::vector<std::string> full = {"ip", "netns", "exec", name_, "env", "UCX_TLS=tcp",
                                     "UCX_NET_DEVICES=" + there_device_};
    full.insert(full.end(), command.begin(), command.end());
    return full;
  }
  const std::string& here_ip() const { return here_ip_; }
  const std::string& there_ip() const { return there_ip_; }
  const std::string& here_device() const { return here_device_; }

 private:
  std::string name_, here_device_, there_device_, here_ip_, there_ip_;
};

}  // namespace

TEST_CASE("actors on another node (a network namespace, TCP over a veth pair) send trees the learner checks") {
  OtherNode node;
  // This side's UCX on the veth too, TCP only: the listener's context reads these when made.
  ::setenv("UCX_TLS", "tcp", 1);
  ::setenv("UCX_NET_DEVICES", node.here_device().c_str(), 1);
  TreeListener listener = TreeListener::bind(node.here_ip() + ":0", {.timeout = 3000ms});
  const std::string address = listener.address();
  CHECK(address.starts_with(node.here_ip() + ":"));
  const pid_t small = spawn(node.inside(actor_command(address, 1, "send", 40, kRows)));
  Watched many(accept_one(listener), 1, kRows);
  const pid_t large = spawn(node.inside(actor_command(address, 2, "send", 4, 1 << 15)));  // about 1.7 MB each
  Watched big(accept_one(listener), 2, 1 << 15);
  // Both came over the veth, from the other namespace's address.
  CHECK(many.channel.peer().starts_with(node.there_ip() + ":"));
  CHECK(big.channel.peer().starts_with(node.there_ip() + ":"));
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
