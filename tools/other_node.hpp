// Another "node" on this machine: a network namespace joined to this one by a veth pair (10.213.K.1
// here, 10.213.K.2 there, K a subnet no interface here uses yet), so that traffic between the two
// crosses a network device as between hosts. Made by `ip` (root); removed with everything in it
// when the object goes, also when making it failed halfway. Used by bench_channel, the channel
// namespace test and shared_job's remote actors.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tensortree::tools {

class OtherNode {
 public:
  // The node, or null (and `why` says which step failed) where namespaces cannot be made.
  static std::unique_ptr<OtherNode> make(std::string& why) {
    const int id = static_cast<int>(::getpid() % 100000);
    std::unique_ptr<OtherNode> node(new OtherNode(id, free_subnet(id)));
    if (!run("ip netns add " + node->name_)) {
      why = "'ip netns add' failed (it needs root and the ip tool)";
      return nullptr;
    }
    node->made_ = true;  // from here on the destructor removes whatever was made
    const std::string in_there = "ip netns exec " + node->name_ + " ";
    for (const std::string& step : {
             fmt::format("ip link add {} type veth peer name {}", node->here_device_, node->there_device_),
             fmt::format("ip link set {} netns {}", node->there_device_, node->name_),
             fmt::format("ip addr add {}/24 dev {}", node->here_ip_, node->here_device_),
             fmt::format("ip link set {} up", node->here_device_),
             in_there + fmt::format("ip addr add {}/24 dev {}", node->there_ip_, node->there_device_),
             in_there + fmt::format("ip link set {} up", node->there_device_),
             in_there + "ip link set lo up",
         }) {
      if (!run(step)) {
        why = "'" + step + "' failed";
        return nullptr;
      }
    }
    return node;
  }
  ~OtherNode() {
    if (!made_) return;
    run("ip link del " + here_device_);  // takes its peer in the namespace with it
    run("ip netns del " + name_);
  }
  OtherNode(const OtherNode&) = delete;
  OtherNode& operator=(const OtherNode&) = delete;

  // What a command run inside the namespace starts with: its UCX held to TCP over the veth.
  std::vector<std::string> inside_prefix() const {
    return {"ip", "netns", "exec", name_, "env", "UCX_TLS=tcp", "UCX_NET_DEVICES=" + there_device_};
  }
  // `command` run inside the namespace.
  std::vector<std::string> inside(const std::vector<std::string>& command) const {
    std::vector<std::string> full = inside_prefix();
    full.insert(full.end(), command.begin(), command.end());
    return full;
  }
  const std::string& name() const { return name_; }
  const std::string& here_ip() const { return here_ip_; }
  const std::string& there_ip() const { return there_ip_; }
  const std::string& here_device() const { return here_device_; }

 private:
  OtherNode(int id, int subnet)
      : name_(fmt::format("tt_node_{}", id)),
        here_device_(fmt::format("ttv{}a", id)),  // interface names are at most 15 characters
        there_device_(fmt::format("ttv{}b", id)),
        here_ip_(fmt::format("10.213.{}.1", subnet)),
        there_ip_(fmt::format("10.213.{}.2", subnet)) {}

  // Runs a shell command quietly (the shell's own "not found" too); false when it fails.
  static bool run(const std::string& command) {
    return std::system(("{ " + command + "; } >/dev/null 2>&1").c_str()) == 0;
  }

  // A /24 under 10.213.0.0/16 that no interface here uses yet, starting from `id`: two nodes at
  // once must not route the same subnet over two veth pairs.
  static int free_subnet(int id) {
    for (int k = 0; k < 250; ++k) {
      const int subnet = 1 + (id + k) % 250;
      if (!run(fmt::format("ip -o -4 addr show to 10.213.{}.0/24 | grep -q .", subnet))) return subnet;
    }
    return 1 + id % 250;
  }

  std::string name_, here_device_, there_device_, here_ip_, there_ip_;
  bool made_ = false;  // the namespace exists
};

}  // namespace tensortree::tools
