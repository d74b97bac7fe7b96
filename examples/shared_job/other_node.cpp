#include "other_node.hpp"

#include <cstdlib>
#include <string>

namespace shared_job {

namespace {

// Runs a shell command quietly (the shell's own "not found" too); false when it fails.
bool run(const std::string& command) { return std::system(("{ " + command + "; } >/dev/null 2>&1").c_str()) == 0; }

// A /24 under 10.214.0.0/16 that no interface here uses yet, starting from `id`: two jobs at once
// must not route the same subnet over two veth pairs. (The channel tests use 10.213.)
int free_subnet(int id) {
  for (int k = 0; k < 250; ++k) {
    const int subnet = 1 + (id + k) % 250;
    const std::string used = "ip -o -4 addr show to 10.214." + std::to_string(subnet) + ".0/24 | grep -q .";
    if (!run(used)) return subnet;
  }
  return 1 + id % 250;
}

}  // namespace

std::unique_ptr<OtherNode> OtherNode::make(int id, std::string& why) {
  std::unique_ptr<OtherNode> node(new OtherNode());
  const std::string tag = std::to_string(id % 100000);
  node->name_ = "tt_job_" + tag;
  node->here_device_ = "ttj" + tag + "a";  // interface names are at most 15 characters
  node->there_device_ = "ttj" + tag + "b";
  const std::string subnet = "10.214." + std::to_string(free_subnet(id)) + ".";
  node->here_ip_ = subnet + "1";
  node->there_ip_ = subnet + "2";
  if (!run("ip netns add " + node->name_)) {
    why = "`ip netns add` failed (it needs root and the ip tool)";
    return nullptr;
  }
  node->made_ = true;  // from here on the destructor cleans up whatever was made
  const std::string there = "ip netns exec " + node->name_ + " ";
  for (const std::string& step : {
           "ip link add " + node->here_device_ + " type veth peer name " + node->there_device_,
           "ip link set " + node->there_device_ + " netns " + node->name_,
           "ip addr add " + node->here_ip_ + "/24 dev " + node->here_device_,
           "ip link set " + node->here_device_ + " up",
           there + "ip addr add " + node->there_ip_ + "/24 dev " + node->there_device_,
           there + "ip link set " + node->there_device_ + " up",
           there + "ip link set lo up",
       }) {
    if (!run(step)) {
      why = "`" + step + "` failed";
      return nullptr;
    }
  }
  return node;
}

OtherNode::~OtherNode() {
  if (!made_) return;
  run("ip link del " + here_device_);  // takes its peer in the namespace with it
  run("ip netns del " + name_);
}

RemoteSite OtherNode::site() const {
  return {.listen = here_ip_ + ":0",
          .learner_env = {"UCX_TLS=tcp", "UCX_NET_DEVICES=" + here_device_},
          .actor_prefix = {"ip", "netns", "exec", name_, "env", "UCX_TLS=tcp", "UCX_NET_DEVICES=" + there_device_},
          .description = "network namespace " + name_ + " (" + there_ip_ + "), TCP over veth " + here_device_ +
                         " (" + here_ip_ + ")"};
}

RemoteSite loopback_site() {
  return {.listen = "127.0.0.1:0", .learner_env = {}, .actor_prefix = {}, .description = "127.0.0.1 (loopback)"};
}

}  // namespace shared_job
