// Another "node" on this machine: a network namespace joined to this one by a veth pair (10.213.K.1
// here, 10.213.K.2 there), so that traffic between the two crosses a network device as between
// hosts. Made by `ip` (root); removed with everything in it when the object goes. Used by
// bench_channel and by tests/channel/test_tree_channel_netns.cpp.
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
    std::unique_ptr<OtherNode> node(new OtherNode(static_cast<int>(::getpid() % 100000)));
    const std::string in_there = "ip netns exec " + node->name_ + " ";
    for (const std::string& step : {
             "ip netns add " + node->name_,
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
    run("ip link del " + here_device_);
    run("ip netns del " + name_);
  }
  OtherNode(const OtherNode&) = delete;
  OtherNode& operator=(const OtherNode&) = delete;

  // `command` run inside the namespace, its UCX held to TCP over the veth.
  std::vector<std::string> inside(const std::vector<std::string>& command) const {
    std::vector<std::string> full = {"ip", "netns", "exec", name_, "env", "UCX_TLS=tcp",
                                     "UCX_NET_DEVICES=" + there_device_};
    full.insert(full.end(), command.begin(), command.end());
    return full;
  }
  const std::string& name() const { return name_; }
  const std::string& here_ip() const { return here_ip_; }
  const std::string& there_ip() const { return there_ip_; }
  const std::string& here_device() const { return here_device_; }

 private:
  explicit OtherNode(int id)
      : name_(fmt::format("tt_node_{}", id)),
        here_device_(fmt::format("ttv{}a", id)),
        there_device_(fmt::format("ttv{}b", id)),
        here_ip_(fmt::format("10.213.{}.1", 1 + id % 250)),
        there_ip_(fmt::format("10.213.{}.2", 1 + id % 250)) {}

  static bool run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

  std::string name_, here_device_, there_device_, here_ip_, there_ip_;
};

}  // namespace tensortree::tools
