// TensorTree methods that write into existing leaves (zero_, fill_, update_) or move an entry
// (rename_key_). Writes keep the leaves' memory, so a consolidated tree stays consolidated.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

void TensorTree::zero_() const { fill_(0.0); }

void TensorTree::fill_(double value) const {
  for_each_leaf([value](const Path&, const Tensor& leaf) { leaf.fill_(value); });
}

void TensorTree::fill_(PathRef path, double value) const {
  if (is_leaf(path)) {
    get(path).fill_(value);
  } else {
    subtree(path).fill_(value);
  }
}

void TensorTree::update_(const TensorTree& other) const {
  // Every pair is checked first, so a mismatch leaves the tree as it was.
  std::vector<std::pair<Tensor, Tensor>> pairs;
  other.for_each_leaf([&](const Path& path, const Tensor& src) {
    if (!contains(path) || !is_leaf(path)) {
      throw InvalidArgument("update_: key " + describe(path) + " of the source is " +
                            (contains(path) ? "a sub-tree" : "missing") + " in this tree, whose keys are " +
                            keys_hint());
    }
    const Tensor& dst = get(path);
    if (dst.shape() != src.shape() || dst.dtype() != src.dtype()) {
      throw InvalidArgument("update_: leaf " + describe(path) + " is " + std::string(dtype_name(dst.dtype())) +
                            shape_str(dst.shape()) + " here but " + std::string(dtype_name(src.dtype())) +
                            shape_str(src.shape()) + " in the source");
    }
    pairs.emplace_back(dst, src);
  });
  for (const auto& [dst, src] : pairs) dst.copy_(src);
}

void TensorTree::rename_key_(PathRef old_path, PathRef new_path, bool safe) {
  const Path& from = old_path.path();
  const Path& to = new_path.path();
  entry_at(from);  // InvalidArgument naming an absent key
  if (from == to) return;
  if (to.empty() || (to.size() > from.size() && std::equal(from.begin(), from.end(), to.begin()))) {
    throw InvalidArgument("rename_key_: " + describe(from) + " cannot move to " + describe(to) +
                          ", which lies inside it");
  }
  if (safe && contains(to)) {
    throw InvalidArgument("rename_key_: " + describe(to) + " already exists (safe=true)");
  }
  if (is_leaf(from)) {
    Tensor leaf = get(from);
    erase(from);
    set(to, std::move(leaf));
  } else {
    TensorTree node = subtree(from);
    erase(from);
    set(to, std::move(node));
  }
}

}  // namespace tensortree
