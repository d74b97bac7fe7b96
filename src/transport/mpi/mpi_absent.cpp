// The distributed entry points of a library built without MPI: each throws NotSupported, so that a
// program links everywhere and learns at run time what this build lacks. An empty Group still
// answers the questions that need no communicator.
#include <memory>
#include <utility>
#include <vector>

#include "tensortree/device_mesh.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/error.hpp"
#include "tensortree/group.hpp"

namespace tensortree {

namespace detail {

class GroupState {};

}  // namespace detail

namespace {

[[noreturn]] void built_without_mpi() { throw NotSupported("tensortree was built without MPI"); }

}  // namespace

Group::Group(std::shared_ptr<detail::GroupState> state) : state_(std::move(state)) {}
int Group::rank() const { return -1; }
int Group::size() const { return 0; }
const std::vector<int>& Group::world_ranks() const {
  static const std::vector<int> no_ranks;
  return no_ranks;
}
Backend& Group::backend(Device) const { built_without_mpi(); }

DeviceMesh::DeviceMesh(const Group&, std::vector<MeshDim>) { built_without_mpi(); }
const Group& DeviceMesh::group(std::string_view) const { built_without_mpi(); }
int DeviceMesh::coordinate(std::string_view) const { built_without_mpi(); }
std::size_t DeviceMesh::dim_index(std::string_view) const { built_without_mpi(); }

struct DistributedContext::State {};

DistributedContext::DistributedContext(int*, char***) { built_without_mpi(); }
DistributedContext::~DistributedContext() = default;
int DistributedContext::rank() const { built_without_mpi(); }
int DistributedContext::size() const { built_without_mpi(); }
int DistributedContext::local_rank() const { built_without_mpi(); }
int DistributedContext::local_size() const { built_without_mpi(); }
Device DistributedContext::device() const { built_without_mpi(); }
const Group& DistributedContext::world() const { built_without_mpi(); }
Group DistributedContext::new_group(std::vector<int>) const { built_without_mpi(); }
DeviceMesh DistributedContext::mesh(std::vector<MeshDim>) const { built_without_mpi(); }

}  // namespace tensortree
