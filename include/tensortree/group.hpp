// Group: a set of ranks that communicate together (a communicator), with the backends that move
// tensors between them. Cheap to copy: copies share the communicators.
#pragma once

#include <memory>
#include <vector>

#include "tensortree/backend.hpp"
#include "tensortree/device.hpp"
#include "tensortree/export.hpp"

namespace tensortree {

namespace detail {
class GroupState;
}  // namespace detail

class TT_API Group {
 public:
  Group() = default;
  explicit Group(std::shared_ptr<detail::GroupState> state);

  // This process's rank in the group, or -1 when it is not a member.
  int rank() const;
  int size() const;
  bool is_member() const { return rank() >= 0; }
  // The world rank of each member, in group-rank order.
  const std::vector<int>& world_ranks() const;

  // The backend that moves tensors on `device`: MPI for the CPU; NCCL for CUDA where the library
  // was built with it (its communicator is created on first use), otherwise MPI staging through
  // pinned host memory. InvalidArgument on a rank that is not a member.
  Backend& backend(Device device) const;

  const std::shared_ptr<detail::GroupState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::GroupState> state_;
};

}  // namespace tensortree
