// The layout of one tree structure, computed once and reused: its Schema and where each leaf, in
// depth-first insertion order, sits in the buffer. Consolidating the same structure again (the
// steady state of every sender) then costs a walk and a hash instead of planning and sorting.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"

namespace tensortree::detail {

// What packing needs of one leaf, read when the walk visits it: each leaf (and its Storage) is
// then visited once per pack, not once for the structure and again for the copy.
struct WalkedLeaf {
  const Tensor* tensor;
  const Storage* storage;
  std::byte* data;  // element 0
  std::uint64_t nbytes;
  std::uint32_t itemsize;
  Device device;
  bool contiguous;
};

// What a walk over a tree learns: an exact byte description of its structure (keys, batch sizes,
// dtypes, shapes, in insertion order) and its leaves in the same order.
struct TreeWalk {
  std::string structure;
  std::vector<WalkedLeaf> leaves;
};

struct LayoutPlan {
  std::string structure;
  std::uint64_t structure_hash = 0;
  DeviceType storage_device = DeviceType::CPU;
  std::shared_ptr<const Schema> schema;
  std::vector<std::uint64_t> offsets;      // by depth-first leaf index
  std::vector<std::uint32_t> layout_order;  // depth-first leaf indices sorted by offset
};

// Walks `tree` into this thread's reusable TreeWalk: its buffers keep their capacity between calls,
// so a steady stream of same-shaped trees allocates nothing here. Valid until the thread's next walk.
const TreeWalk& walk_tree(const TensorTree& tree);
// The cached plan for the walked structure, planned now if this structure is new.
std::shared_ptr<const LayoutPlan> layout_plan_for(const TensorTree& tree, const TreeWalk& walk,
                                                  DeviceType storage_device);

}  // namespace tensortree::detail
