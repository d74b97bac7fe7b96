// GroupState: what the copies of one Group share. For a member: the communicator, and the
// backends that use it, each created on first use. A non-member knows only who the members are.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/mpi/mpi_backend.hpp"
#include "transport/mpi/mpi_handles.hpp"
#include "tensortree/backend.hpp"
#include "tensortree/device.hpp"

namespace tensortree::detail {

class GroupState {
 public:
  // A member's state: takes `comm` (whose errors it makes returnable) and the members' world ranks
  // in group-rank order.
  GroupState(MpiComm comm, std::vector<int> world_ranks);
  // A non-member's state.
  explicit GroupState(std::vector<int> world_ranks);
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;
  ~GroupState();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(world_ranks_.size()); }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // MPI_COMM_NULL for a non-member.
  MPI_Comm comm() const { return comm_.get(); }

  // The CPU: MPI. CUDA: NCCL where built (created collectively over the group on first use, one
  // communicator per device), else MPI staged through pinned host memory.
  Backend& backend(Device device);

 private:
  Backend& cuda_backend(Device device);

  // Declared first, destroyed last: the backends below borrow the communicator.
  MpiComm comm_;
  std::vector<int> world_ranks_;
  int rank_ = -1;
  std::mutex backends_mutex_;
  std::unique_ptr<MpiBackend> mpi_;
  std::unique_ptr<Backend> staged_;
  std::map<int, std::unique_ptr<Backend>> nccl_by_device_;
};

}  // namespace tensortree::detail
