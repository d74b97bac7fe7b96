// The transports a group gets (comm/transport_choice.hpp decides which serves each pair):
// - host memory: shared memory with the members of this node that can map it, MPI with the rest
//   (for an in-process group, the in-process backend where MPI would serve);
// - CUDA memory: NCCL where it serves the group; otherwise CUDA IPC with the members bound to this
//   GPU and MPI staged through pinned host memory with the rest (an in-process group stages
//   everything over its in-process backend).
// The composition root of the transports: the one place that knows every transport folder.
#pragma once

#include "comm/group_state.hpp"

namespace tensortree::detail {

class DefaultTransportFactory final : public TransportFactory {
 public:
  // The group's bootstrap must be an MPI bootstrap (its communicator carries the MPI transport) or
  // an in-process one (its store's mailboxes carry the in-process transport).
  DeviceTransports create(GroupState& group, Device device) override;
};

}  // namespace tensortree::detail
