#include "remote_site.hpp"

namespace shared_job {

RemoteSite namespace_site(const tensortree::tools::OtherNode& node) {
  return {.listen = node.here_ip() + ":0",
          .learner_env = {"UCX_TLS=tcp", "UCX_NET_DEVICES=" + node.here_device()},
          .actor_prefix = node.inside_prefix(),
          .description = "network namespace " + node.name() + " (" + node.there_ip() + "), TCP over veth " +
                         node.here_device() + " (" + node.here_ip() + ")"};
}

RemoteSite loopback_site() {
  return {.listen = "127.0.0.1:0", .learner_env = {}, .actor_prefix = {}, .description = "127.0.0.1 (loopback)"};
}

}  // namespace shared_job
