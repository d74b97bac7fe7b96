// DeviceMesh: the ranks of a group laid out on named dimensions ({"dp": 2, "tp": 2}), with one
// group per dimension: the ranks that differ only in that coordinate.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tensortree/export.hpp"
#include "tensortree/group.hpp"

namespace tensortree {

struct MeshDim {
  std::string name;
  int size;
};

class TT_API DeviceMesh {
 public:
  // Collective over `parent`: every member calls it with the same dims, whose sizes multiply to
  // parent.size(). Ranks are laid out in C order (the last dimension varies fastest).
  DeviceMesh(const Group& parent, std::vector<MeshDim> dims);

  const std::vector<MeshDim>& dims() const { return dims_; }
  const Group& group() const { return parent_; }
  // The group of ranks that share every coordinate but `dim`'s; InvalidArgument for unknown names.
  const Group& group(std::string_view dim) const;
  int coordinate(std::string_view dim) const;
  const std::vector<int>& coordinates() const { return coordinates_; }

 private:
  std::size_t dim_index(std::string_view dim) const;

  Group parent_;
  std::vector<MeshDim> dims_;
  std::vector<int> coordinates_;
  std::vector<Group> dim_groups_;
};

}  // namespace tensortree
