// Where the remote actors run and how the learner reaches them: "another node" on this machine (a
// network namespace joined by a veth pair, tools/other_node.hpp, with UCX held to TCP over that pair
// on both sides, as between two hosts), or this host's loopback where no namespace can be made.
#pragma once

#include <string>
#include <vector>

#include "other_node.hpp"

namespace shared_job {

struct RemoteSite {
  std::string listen;                     // the learner binds its listener here ("ip:0")
  std::vector<std::string> learner_env;   // "NAME=value" added to the learner's environment
  std::vector<std::string> actor_prefix;  // a remote actor's command line starts with these
  std::string description;                // for the launcher's first lines
};

RemoteSite namespace_site(const tensortree::tools::OtherNode& node);
// Remote actors on this host's loopback: the same channels, no veth.
RemoteSite loopback_site();

}  // namespace shared_job
