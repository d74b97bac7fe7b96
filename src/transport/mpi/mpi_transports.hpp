// The transports a group over an MPI bootstrap gets: MPI for host memory; for CUDA memory NCCL
// where the library was built with it, otherwise MPI staged through pinned host memory. Every
// peer is served by the same backend per device today; the table is per peer so that transports
// that pair only some ranks (shared memory, CUDA IPC) can be added here.
#pragma once

#include "comm/group_state.hpp"

namespace tensortree::detail {

class MpiTransportFactory final : public TransportFactory {
 public:
  // The group's bootstrap must be an MpiBootstrap (its communicator carries the MPI transport).
  DeviceTransports create(GroupState& group, Device device) override;
};

}  // namespace tensortree::detail
