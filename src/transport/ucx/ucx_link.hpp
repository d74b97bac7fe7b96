// Messages between processes over UCX, without UCX's types: a Node owns one ucp context and worker
// (and a listener, for the side that accepts); a Link is one endpoint of it, with UCX's peer-failure
// handling, behind the engine-neutral interface of transport/link. A message is an active message;
// its placement is chosen before any of its bytes arrive.
#pragma once

#include <memory>
#include <string>

#include "transport/link/message_link.hpp"

namespace tensortree::ucx {

using link::Arrival;
using link::Clock;
using link::kMaxHeaderBytes;
using link::Link;
using link::Node;
using link::Placement;

// A node listening on `address`: "host:port" or ":port"; port 0 picks a free one.
std::shared_ptr<Node> listening_node(const std::string& address);
// A node that only connects.
std::shared_ptr<Node> connecting_node();

}  // namespace tensortree::ucx
