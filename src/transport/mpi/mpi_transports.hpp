// The transports a group over an MPI bootstrap gets (comm/transport_choice.hpp decides):
// - host memory: shared memory with the members of this node that can map it, MPI with the rest;
// - CUDA memory: NCCL where it serves the group; otherwise CUDA IPC with the members bound to this
//   GPU and MPI staged through pinned host memory with the rest.
#pragma once

#include "comm/group_state.hpp"

namespace tensortree::detail {

class MpiTransportFactory final : public TransportFactory {
 public:
  // The group's bootstrap must be an MpiBootstrap (its communicator carries the MPI transport).
  DeviceTransports create(GroupState& group, Device device) override;
};

}  // namespace tensortree::detail
