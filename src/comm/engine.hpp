// Engine: a communicator that is both a group's Collectives and the PeerTransport of its peers
// (MPI, NCCL, the in-process mailboxes, staging over one of these). How transports are built, not
// what a group holds: the group keeps the two roles apart (DeviceTransports).
#pragma once

#include <string>
#include <string_view>

#include "tensortree/collectives.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

class Engine : public Collectives, public PeerTransport {
 public:
  // One answer for both roles.
  std::string_view name() const override = 0;
  TransportCapabilities capabilities() const override = 0;
  int rank() const override = 0;
  int size() const override = 0;
  void abort(const std::string& reason) override = 0;
};

}  // namespace tensortree::detail
