// The distributed entry points of a library built without MPI: each throws NotSupported, so that a
// program links everywhere and learns at run time what this build lacks. Group and DeviceMesh are
// backend-neutral (comm/); without a context no group has members.
#include <memory>
#include <utility>
#include <vector>

#include "tensortree/device_mesh.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/error.hpp"
#include "tensortree/group.hpp"

namespace tensortree {

namespace {

[[noreturn]] void built_without_mpi() { throw NotSupported("tensortree was built without MPI"); }

}  // namespace

struct DistributedContext::State {};

DistributedContext::DistributedContext(int*, char***, GroupOptions) { built_without_mpi(); }
DistributedContext::DistributedContext(GroupOptions) { built_without_mpi(); }
DistributedContext::~DistributedContext() = default;
int DistributedContext::rank() const { built_without_mpi(); }
int DistributedContext::size() const { built_without_mpi(); }
int DistributedContext::local_rank() const { built_without_mpi(); }
int DistributedContext::local_size() const { built_without_mpi(); }
Device DistributedContext::device() const { built_without_mpi(); }
const Group& DistributedContext::world() const { built_without_mpi(); }
Group DistributedContext::new_group(std::vector<int>) const { built_without_mpi(); }
Group DistributedContext::new_group(std::vector<int>, GroupOptions) const { built_without_mpi(); }
DeviceMesh DistributedContext::mesh(std::vector<MeshDim>) const { built_without_mpi(); }

}  // namespace tensortree
