// TensorTree methods that write into existing leaves (zero_, fill_, update_) or move an entry
// (rename_key_). Writes keep the leaves' memory, so a consolidated tree stays consolidated.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
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
      throw InvalidArgument(fmt::format("update_: key {} of the source is {} in this tree, whose keys are {}",
                                        describe(path), contains(path) ? "a sub-tree" : "missing", keys_hint()));
    }
    const Tensor& dst = get(path);
    if (dst.shape() != src.shape() || dst.dtype() != src.dtype()) {
      throw InvalidArgument(fmt::format("update_: leaf {} is {}{} here but {}{} in the source", describe(path),
                                        dst.dtype(), shape_str(dst.shape()), src.dtype(), shape_str(src.shape())));
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
    throw InvalidArgument(fmt::format("rename_key_: {} cannot move to {}, which lies inside it", describe(from),
                                      describe(to)));
  }
  if (safe && contains(to)) {
    throw InvalidArgument(fmt::format("rename_key_: {} already exists (safe=true)", describe(to)));
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
