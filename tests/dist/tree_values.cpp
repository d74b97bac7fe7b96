#include "tree_values.hpp"

#include <optional>
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

namespace {

// The index of the first element of `got` that is not expected(index), compared as doubles. The
// typed loop runs for contiguous real tensors (every tree these tests receive); others go element
// by element through value_at_linear.
template <class Expected>
std::optional<std::int64_t> first_wrong_element(const Tensor& got, const Expected& expected) {
  std::optional<std::int64_t> wrong;
  bool checked = false;
  if (got.is_contiguous()) {
    visit_dtype(got.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T>) {
        const T* data = got.data<T>();
        for (std::int64_t i = 0; i < got.numel() && !wrong; ++i) {
          if (static_cast<double>(data[i]) != expected(i)) wrong = i;
        }
        checked = true;
      }
    });
  }
  for (std::int64_t i = 0; !checked && i < got.numel() && !wrong; ++i) {
    if (got.value_at_linear(i).real() != expected(i)) wrong = i;
  }
  return wrong;
}

}  // namespace

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
    const std::optional<std::int64_t> wrong = first_wrong_element(got, [&](std::int64_t i) {
      return leaf_value(rank, step, leaf, i);
    });
    if (wrong) {
      return std::string(def.path) + ": element " + std::to_string(*wrong) + " is " +
             std::to_string(got.value_at_linear(*wrong).real());
    }
  }
  return {};
}

}  // namespace tensortree::test
