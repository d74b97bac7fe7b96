// Every way a TensorTree changes after it was packed once, for the tests that prove a sender's cached
// packing plan never outlives the structure it was made for: the structural changes (which must give
// the tree a new structure version) and the in-place writes (which keep it, so the plan is reused and
// must still read the new values).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tensortree/tree.hpp"

namespace tensortree::test {

// Batch {4}; a strided leaf, three levels of nesting, several dtypes; every value from `start` on.
inline TensorTree mutation_base_tree(double start) {
  TensorTree tree(Shape{4});
  tree.set("obs", Tensor::arange({4, 3}, start, 1, {DType::Float32}));
  tree.set("action", Tensor::arange({4}, start + 20, 1, {DType::Int64}));
  tree.set("next.obs", Tensor::arange({2, 4}, start + 40, 1, {DType::Float64}).transpose(0, 1));
  tree.set("next.reward", Tensor::arange({4}, start + 60, 1, {DType::Float32}));
  tree.set("info.episode.return", Tensor::arange({4, 2}, start + 80, 1, {DType::Float64}));
  return tree;
}

struct TreeMutation {
  std::string name;
  bool structural;  // a new structure version; else an in-place write that keeps it
  std::function<void(TensorTree&)> apply;
};

inline std::vector<TreeMutation> tree_mutations() {
  const auto fresh = [](Shape shape, double start, DType dtype) { return Tensor::arange(std::move(shape), start, 1, {dtype}); };
  return {
      {"set replaces a leaf with another tensor of the same shape", true,
       [=](TensorTree& t) { t.set("obs", fresh({4, 3}, 500, DType::Float32)); }},
      {"set adds a leaf", true, [=](TensorTree& t) { t.set("extra", fresh({4, 5}, 600, DType::Int32)); }},
      {"set through a sub-tree reference", true,
       [=](TensorTree& t) { t.subtree("next").set("reward", fresh({4}, 700, DType::Float32)); }},
      {"set at a nested path replaces a deep leaf", true,
       [=](TensorTree& t) { t.set("info.episode.return", fresh({4, 2}, 800, DType::Float64)); }},
      {"set replaces a sub-tree", true,
       [=](TensorTree& t) {
         TensorTree next(Shape{4});
         next.set("obs", fresh({4, 2}, 900, DType::Float64));
         next.set("reward", fresh({4}, 950, DType::Float32));
         t.set("next", std::move(next));
       }},
      {"erase", true, [](TensorTree& t) { t.erase("action"); }},
      {"rename_key_", true, [](TensorTree& t) { t.rename_key_("obs", "observation"); }},
      {"set_batch_size", true, [](TensorTree& t) { t.set_batch_size(Shape{}); }},
      {"assigning to a sub-tree", true,
       [=](TensorTree& t) { t.subtree("info") = mutation_base_tree(1000).subtree("info"); }},
      {"assigning the whole tree", true, [](TensorTree& t) { t = mutation_base_tree(1100); }},
      {"update with another tree's leaves", true,
       [=](TensorTree& t) {
         TensorTree other(Shape{4});
         other.set("next.reward", fresh({4}, 1200, DType::Float32));
         t.update(other);
       }},
      {"moving a sub-tree out", true,
       [](TensorTree& t) { [[maybe_unused]] const TensorTree taken = std::move(t.subtree("info")); }},
      {"update_ in place", false, [](TensorTree& t) { t.update_(mutation_base_tree(1300)); }},
      {"apply_ in place on a sub-tree", false,
       [](TensorTree& t) { t.subtree("next").apply_([](const Tensor& leaf) { return leaf.mul(Scalar(3)); }); }},
      {"masked_fill_", false,
       [](TensorTree& t) {
         const Tensor last_two_rows = Tensor::arange({4}, 0, 1, {DType::Int64}).gt(Scalar(1));
         t.masked_fill_(last_two_rows, 42);
       }},
      {"set_ in place", false, [=](TensorTree& t) { t.set_("obs", fresh({4, 3}, 1400, DType::Float32)); }},
      {"fill_ of a sub-tree", false, [](TensorTree& t) { t.fill_("next", 7); }},
      {"copy_ into a leaf", false,
       [=](TensorTree& t) { t.get("next.obs").copy_(fresh({4, 2}, 1500, DType::Float64)); }},
  };
}

}  // namespace tensortree::test
