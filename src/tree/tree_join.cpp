// TensorTree::stack and cat: trees of one structure joined leaf by leaf.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/batch_dims.hpp"
#include "tree/path_text.hpp"

namespace tensortree {

namespace {

using detail::child_path;
using detail::quoted;

std::vector<const TensorTree*> pointers_to(std::span<const TensorTree> trees) {
  std::vector<const TensorTree*> out;
  out.reserve(trees.size());
  for (const TensorTree& tree : trees) out.push_back(&tree);
  return out;
}

std::int64_t wrapped_dim(const char* operation, std::int64_t dim, std::int64_t count,
                         const Shape& batch_size) {
  return detail::wrap_batch_dim(operation, dim, count, batch_size);
}

Shape stacked_batch(std::span<const TensorTree* const> trees, const Path& path, std::int64_t dim) {
  const Shape& first = trees[0]->batch_size();
  for (std::size_t i = 1; i < trees.size(); ++i) {
    if (trees[i]->batch_size() != first) {
      throw InvalidArgument(fmt::format("stack: batch_size {} of tree {} at {} differs from {} of tree 0",
                                        shape_str(trees[i]->batch_size()), i, quoted(path), shape_str(first)));
    }
  }
  Shape out = first;
  out.insert(out.begin() + dim, static_cast<std::int64_t>(trees.size()));
  return out;
}

Shape concatenated_batch(std::span<const TensorTree* const> trees, const Path& path, std::int64_t dim) {
  const Shape& first = trees[0]->batch_size();
  Shape out = first;
  for (std::size_t i = 1; i < trees.size(); ++i) {
    const Shape& batch = trees[i]->batch_size();
    bool matches = batch.size() == first.size();
    for (std::size_t d = 0; matches && d < first.size(); ++d) {
      matches = static_cast<std::int64_t>(d) == dim || batch[d] == first[d];
    }
    if (!matches) {
      throw InvalidArgument(fmt::format("cat: batch_size {} of tree {} at {} does not match {} of tree 0 outside "
                                        "dim {}", shape_str(batch), i, quoted(path), shape_str(first), dim));
    }
    out[static_cast<std::size_t>(dim)] += batch[static_cast<std::size_t>(dim)];
  }
  return out;
}

Tensor join_leaves(std::span<const Tensor> leaves, const Path& path, std::int64_t dim, bool new_dim) {
  try {
    return new_dim ? Tensor::stack(leaves, dim) : Tensor::cat(leaves, dim);
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(fmt::format("{} of leaf {}: {}", new_dim ? "stack" : "cat", quoted(path), error.what()));
  }
}

}  // namespace

void TensorTree::check_same_keys(std::span<const TensorTree* const> trees, const Path& path,
                                 const char* operation) {
  const TensorTree& first = *trees[0];
  auto kind = [](const Entry& entry) { return entry.node ? "sub-tree" : "leaf"; };
  for (std::size_t i = 1; i < trees.size(); ++i) {
    const TensorTree& other = *trees[i];
    const std::string tree_i = fmt::format("tree {}", i);
    for (const Entry& entry : first.entries_) {
      const Entry* match = other.find(entry.key);
      if (!match) {
        throw InvalidArgument(fmt::format("{}: key {} of tree 0 is missing from {}", operation,
                                          quoted(child_path(path, entry.key)), tree_i));
      }
      if (!match->node != !entry.node) {
        throw InvalidArgument(fmt::format("{}: {} is a {} in tree 0 but a {} in {}", operation,
                                          quoted(child_path(path, entry.key)), kind(entry), kind(*match), tree_i));
      }
    }
    for (const Entry& entry : other.entries_) {
      if (!first.find(entry.key)) {
        throw InvalidArgument(fmt::format("{}: key {} of {} is missing from tree 0", operation,
                                          quoted(child_path(path, entry.key)), tree_i));
      }
    }
  }
}

TensorTree TensorTree::joined(std::span<const TensorTree* const> trees, Path& path, std::int64_t dim,
                              bool new_dim) {
  check_same_keys(trees, path, new_dim ? "stack" : "cat");
  TensorTree out(new_dim ? stacked_batch(trees, path, dim) : concatenated_batch(trees, path, dim));
  std::vector<const TensorTree*> nodes(trees.size());
  std::vector<Tensor> leaves(trees.size());
  for (const Entry& entry : trees[0]->entries_) {
    path.push_back(entry.key);
    if (entry.node) {
      for (std::size_t i = 0; i < trees.size(); ++i) nodes[i] = trees[i]->find(entry.key)->node.get();
      out.append(entry.key, joined(nodes, path, dim, new_dim));
    } else {
      for (std::size_t i = 0; i < trees.size(); ++i) leaves[i] = trees[i]->find(entry.key)->leaf;
      out.append(entry.key, join_leaves(leaves, path, dim, new_dim));
    }
    path.pop_back();
  }
  return out;
}

TensorTree TensorTree::stack(std::span<const TensorTree> trees, std::int64_t dim) {
  if (trees.empty()) throw InvalidArgument("stack needs at least one tree");
  const std::int64_t d = wrapped_dim("stack", dim, trees[0].batch_dims() + 1, trees[0].batch_size_);
  Path path;
  return joined(pointers_to(trees), path, d, true);
}

TensorTree TensorTree::cat(std::span<const TensorTree> trees, std::int64_t dim) {
  if (trees.empty()) throw InvalidArgument("cat needs at least one tree");
  const std::int64_t d = wrapped_dim("cat", dim, trees[0].batch_dims(), trees[0].batch_size_);
  Path path;
  return joined(pointers_to(trees), path, d, false);
}

TensorTree TensorTree::stack(std::initializer_list<TensorTree> trees, std::int64_t dim) {
  return stack(std::span<const TensorTree>(trees.begin(), trees.size()), dim);
}

TensorTree TensorTree::cat(std::initializer_list<TensorTree> trees, std::int64_t dim) {
  return cat(std::span<const TensorTree>(trees.begin(), trees.size()), dim);
}
}  // namespace tensortree
