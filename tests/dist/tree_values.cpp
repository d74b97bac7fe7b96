#include "tree_values.hpp"

#include <type_traits>

namespace tensortree::test {

double leaf_value(int rank, int step, std::size_t leaf, std::int64_t index) {
  return static_cast<double>(1 + (rank * 31 + step * 7 + static_cast<std::int64_t>(leaf) * 13 + index) % 120);
}

void fill_tree(const TensorTree& tree, const std::vector<LeafDef>& leaves, int rank, int step) {
  for (std::size_t leaf = 0; leaf < leaves.size(); ++leaf) {
    const Tensor target = tree.get(leaves[leaf].path);
    visit_dtype(target.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T>) {
        T* data = target.data<T>();
        for (std::int64_t i = 0; i < target.numel(); ++i) data[i] = static_cast<T>(leaf_value(rank, step, leaf, i));
      }
    });
  }
}

TensorTree zeros_tree(const std::vector<LeafDef>& leaves, Shape batch_size) {
  TensorTree tree(std::move(batch_size));
  for (const LeafDef& def : leaves) tree.set(def.path, Tensor::zeros(def.shape, {def.dtype}));
  return tree;
}

TensorTree make_tree(const std::vector<LeafDef>& leaves, Shape batch_size, int rank, int step) {
  TensorTree tree = zeros_tree(leaves, std::move(batch_size));
  fill_tree(tree, leaves, rank, step);
  return tree;
}

std::string tree_mismatch(const TensorTree& tree, const std::vector<LeafDef>& leaves, int rank, int step) {
  for (std::size_t leaf = 0; leaf < leaves.size(); ++leaf) {
    const LeafDef& def = leaves[leaf];
    if (!tree.contains(def.path)) return std::string(def.path) + " is missing";
    const Tensor& got = tree.get(def.path);
    if (got.dtype() != def.dtype || got.shape() != def.shape) return std::string(def.path) + " has another dtype or shape";
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      const double value = got.value_at_linear(i).real();
      if (value != leaf_value(rank, step, leaf, i)) {
        return std::string(def.path) + ": element " + std::to_string(i) + " is " + std::to_string(value);
      }
    }
  }
  return {};
}

}  // namespace tensortree::test
