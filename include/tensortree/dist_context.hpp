// DistributedContext: the process's place in the job. Initialises MPI (or adopts an MPI the
// program initialised), finds the local rank among the ranks sharing this host, binds the CUDA
// device local_rank mod device_count, and hands out groups. NCCL communicators are created lazily,
// from an ncclUniqueId broadcast over MPI, the first time a group moves a CUDA tensor. While it
// lives, MPI_COMM_WORLD returns errors instead of aborting the job (Open MPI raises errors of the
// library's nonblocking collectives there); the program's error handler is restored afterwards.
#pragma once

#include <memory>
#include <vector>

#include "tensortree/device.hpp"
#include "tensortree/device_mesh.hpp"
#include "tensortree/export.hpp"
#include "tensortree/group.hpp"

namespace tensortree {

class TT_API DistributedContext {
 public:
  // argc/argv go to MPI_Init when this context initialises MPI. `options` are the world's, and
  // the default of every group made from this context; fields left unset take the TENSORTREE_*
  // variables' values (GroupOptions::resolve). A bad value of one is InvalidArgument naming the
  // variable and the value, thrown before MPI starts.
  explicit DistributedContext(int* argc = nullptr, char*** argv = nullptr, GroupOptions options = {});
  explicit DistributedContext(GroupOptions options);
  DistributedContext(const DistributedContext&) = delete;
  DistributedContext& operator=(const DistributedContext&) = delete;
  // Finalises MPI only if this context initialised it, and not once world() was aborted (see
  // Group::abort; Open MPI's MPI_Finalize may wait forever for a rank that died).
  ~DistributedContext();

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  // cuda:(local_rank mod device count), or the CPU where no GPU is usable.
  Device device() const;

  const Group& world() const;
  // Collective over the world (every rank calls it with the same list; InvalidArgument on every
  // rank otherwise); ranks not in the list get a Group of which they are not a member. The first
  // form takes the options the world was made with; the second layers `options` over the
  // environment as the context does. InvalidArgument for bad options, before any collective step.
  Group new_group(std::vector<int> world_ranks) const;
  Group new_group(std::vector<int> world_ranks, GroupOptions options) const;
  // Collective over the world.
  DeviceMesh mesh(std::vector<MeshDim> dims) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tensortree
