// Trees whose every element names the rank, step, leaf and index it belongs to, for distributed
// tests that check every element of what arrived.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensortree/tree.hpp"

namespace tensortree::test {

struct LeafDef {
  const char* path;  // "next.obs" nests
  DType dtype;
  Shape shape;       // the batch dimensions first
};

// Non-zero, distinct per rank, step, leaf and element modulo 120: exact in every real dtype.
double leaf_value(int rank, int step, std::size_t leaf, std::int64_t index);

// Writes rank's values for `step` into every leaf (CPU, contiguous) in place, so that a
// consolidated tree stays consolidated.
void fill_tree(const TensorTree& tree, const std::vector<LeafDef>& leaves, int rank, int step);
TensorTree zeros_tree(const std::vector<LeafDef>& leaves, Shape batch_size);
TensorTree make_tree(const std::vector<LeafDef>& leaves, Shape batch_size, int rank, int step);
// Empty when every element of every leaf holds rank's value for `step`; else the first that does not.
std::string tree_mismatch(const TensorTree& tree, const std::vector<LeafDef>& leaves, int rank, int step);

}  // namespace tensortree::test
