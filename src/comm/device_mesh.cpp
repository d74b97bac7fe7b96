// DeviceMesh: named dimensions over a group, each dimension's group split from the parent's
// bootstrap. Transport-neutral: the sub-groups get the parent's transport factory and options.
#include "tensortree/device_mesh.hpp"

#include <cstdint>
#include <ranges>
#include <string>
#include <utility>

#include "comm/agreement.hpp"
#include "comm/group_state.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

void validate_mesh(const Group& parent, const std::vector<MeshDim>& dims) {
  if (!parent.is_member()) throw InvalidArgument("a DeviceMesh is built by members of its group only");
  if (dims.empty()) throw InvalidArgument("a DeviceMesh needs at least one dimension");
  std::int64_t product = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].name.empty()) throw InvalidArgument(fmt::format("mesh dimension {} has no name", i));
    if (dims[i].size < 1) {
      throw InvalidArgument(fmt::format("mesh dimension '{}' has size {}", dims[i].name, dims[i].size));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (dims[j].name == dims[i].name) throw InvalidArgument(fmt::format("mesh dimension '{}' appears twice",
                                                                          dims[i].name));
    }
    product *= dims[i].size;
  }
  if (product != parent.size()) {
    throw InvalidArgument(fmt::format("mesh dimensions multiply to {} but the group has {} ranks", product,
                                      parent.size()));
  }
}

std::uint64_t mesh_fingerprint(const std::vector<MeshDim>& dims) {
  detail::Fingerprint fingerprint;
  for (const MeshDim& dim : dims) fingerprint.add(dim.name).add(static_cast<std::uint64_t>(dim.size));
  return fingerprint.value();
}

// C order: the last dimension varies fastest.
std::vector<int> coordinates_of(int rank, const std::vector<MeshDim>& dims) {
  std::vector<int> coordinates(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    coordinates[d] = rank % dims[d].size;
    rank /= dims[d].size;
  }
  return coordinates;
}

int linear_index(const std::vector<int>& coordinates, const std::vector<MeshDim>& dims) {
  int index = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) index = index * dims[d].size + coordinates[d];
  return index;
}

// The ranks that share every coordinate but dimension `d`'s, ranked by that coordinate.
Group dimension_group(const Group& parent, const std::vector<MeshDim>& dims, const std::vector<int>& coordinates,
                      std::size_t d) {
  std::vector<int> line = coordinates;
  line[d] = 0;
  const int color = linear_index(line, dims);
  std::vector<int> world_ranks(static_cast<std::size_t>(dims[d].size));
  for (int i = 0; i < dims[d].size; ++i) {
    line[d] = i;
    world_ranks[static_cast<std::size_t>(i)] = parent.world_ranks()[static_cast<std::size_t>(linear_index(line, dims))];
  }
  detail::GroupState& state = detail::GroupAccess::require(parent);
  return detail::GroupAccess::make(state.split(color, coordinates[d], std::move(world_ranks), state.requested_options()));
}

}  // namespace

DeviceMesh::DeviceMesh(const Group& parent, std::vector<MeshDim> dims) : parent_(parent), dims_(std::move(dims)) {
  validate_mesh(parent_, dims_);
  detail::require_agreement(parent_, mesh_fingerprint(dims_), "mesh dimensions");
  coordinates_ = coordinates_of(parent_.rank(), dims_);
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    dim_groups_.push_back(dimension_group(parent_, dims_, coordinates_, d));
  }
}

const Group& DeviceMesh::group(std::string_view dim) const { return dim_groups_[dim_index(dim)]; }

int DeviceMesh::coordinate(std::string_view dim) const { return coordinates_[dim_index(dim)]; }

std::size_t DeviceMesh::dim_index(std::string_view dim) const {
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    if (dims_[d].name == dim) return d;
  }
  const auto names = dims_ | std::views::transform(&MeshDim::name);
  throw InvalidArgument(fmt::format("the mesh has no dimension '{}' (it has {})", dim, fmt::join(names, ", ")));
}

}  // namespace tensortree
