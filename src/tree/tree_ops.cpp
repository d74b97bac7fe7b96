// TensorTree operations that build new trees: batch indexing, apply/to/clone, stack/cat,
// select/exclude, key flattening; plus equal() and update().
#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

namespace {

std::string quoted(const Path& path) {
  if (path.empty()) return "the root";
  std::string text = "'";
  text += path_str(path);
  text += '\'';
  return text;
}

// {"next", "obs"}: unambiguous where keys may contain the separator.
std::string listed(const Path& path) {
  std::string text = "{";
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i) text += ", ";
    text += '"';
    text += path[i];
    text += '"';
  }
  return text + "}";
}

Path child_path(Path path, const std::string& key) {
  path.push_back(key);
  return path;
}

// The length of Python's range(n)[start:stop:step] for a positive step.
std::int64_t sliced_length(std::int64_t n, std::int64_t start, std::int64_t stop, std::int64_t step) {
  auto clamp = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
  const std::int64_t begin = clamp(start);
  const std::int64_t end = std::max(clamp(stop), begin);
  return (end - begin + step - 1) / step;
}

void check_row_index(const Tensor& rows, const Shape& batch_size) {
  if (batch_size.empty()) throw InvalidArgument("index by rows of a tree with batch_size []");
  if (!rows.defined() || rows.dim() != 1 || !rows.device().is_cpu() ||
      (rows.dtype() != DType::Int64 && rows.dtype() != DType::Int32)) {
    throw InvalidArgument("index by rows needs a 1-D int64 or int32 CPU tensor, got " +
                          (rows.defined() ? std::string(dtype_name(rows.dtype())) + shape_str(rows.shape()) +
                                                " on " + rows.device().str()
                                          : std::string("an undefined tensor")));
  }
  const std::int64_t n = batch_size[0];
  for (std::int64_t i = 0; i < rows.numel(); ++i) {
    const std::int64_t row =
        rows.dtype() == DType::Int64 ? rows.at<std::int64_t>({i}) : rows.at<std::int32_t>({i});
    if (row < -n || row >= n) {
      throw InvalidArgument("index by rows: rows[" + std::to_string(i) + "] = " + std::to_string(row) +
                            " is out of range for batch_size " + shape_str(batch_size));
    }
  }
}

std::vector<Path> paths_of(std::initializer_list<PathRef> refs) {
  std::vector<Path> out;
  out.reserve(refs.size());
  for (const PathRef& ref : refs) out.push_back(ref.path());
  return out;
}

std::vector<const TensorTree*> pointers_to(std::span<const TensorTree> trees) {
  std::vector<const TensorTree*> out;
  out.reserve(trees.size());
  for (const TensorTree& tree : trees) out.push_back(&tree);
  return out;
}

// `dim` among `count` possible positions, negative counting from the end.
std::int64_t wrapped_dim(const char* operation, std::int64_t dim, std::int64_t count,
                         const Shape& batch_size) {
  const std::int64_t wrapped = dim < 0 ? dim + count : dim;
  if (wrapped < 0 || wrapped >= count) {
    const std::string expected =
        count == 0 ? std::string("there is no batch dimension")
                   : "expected " + std::to_string(-count) + ".." + std::to_string(count - 1);
    throw InvalidArgument(std::string(operation) + ": dim " + std::to_string(dim) +
                          " is out of range for batch_size " + shape_str(batch_size) + " (" + expected + ")");
  }
  return wrapped;
}

Shape stacked_batch(std::span<const TensorTree* const> trees, const Path& path, std::int64_t dim) {
  const Shape& first = trees[0]->batch_size();
  for (std::size_t i = 1; i < trees.size(); ++i) {
    if (trees[i]->batch_size() != first) {
      throw InvalidArgument("stack: batch_size " + shape_str(trees[i]->batch_size()) + " of tree " +
                            std::to_string(i) + " at " + quoted(path) + " differs from " + shape_str(first) +
                            " of tree 0");
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
      throw InvalidArgument("cat: batch_size " + shape_str(batch) + " of tree " + std::to_string(i) + " at " +
                            quoted(path) + " does not match " + shape_str(first) + " of tree 0 outside dim " +
                            std::to_string(dim));
    }
    out[static_cast<std::size_t>(dim)] += batch[static_cast<std::size_t>(dim)];
  }
  return out;
}

Tensor join_leaves(std::span<const Tensor> leaves, const Path& path, std::int64_t dim, bool new_dim) {
  try {
    return new_dim ? Tensor::stack(leaves, dim) : Tensor::cat(leaves, dim);
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(std::string(new_dim ? "stack" : "cat") + " of leaf " + quoted(path) + ": " +
                          error.what());
  }
}

}  // namespace

// ---- structure-preserving transforms ------------------------------------------------------------

TensorTree TensorTree::transformed(const PathLeafFn& leaf_fn, const BatchFn& batch_fn) const {
  Path path = location();  // so that messages name full paths
  return transformed(path, leaf_fn, batch_fn);
}

TensorTree TensorTree::transformed(Path& path, const PathLeafFn& leaf_fn, const BatchFn& batch_fn) const {
  TensorTree out(batch_fn(batch_size_));
  out.entries_.reserve(entries_.size());
  for (const Entry& entry : entries_) {
    path.push_back(entry.key);
    if (entry.node) {
      out.append(entry.key, entry.node->transformed(path, leaf_fn, batch_fn));
    } else {
      Tensor result = leaf_fn(path, entry.leaf);
      if (!result.defined() || !starts_with(result.shape(), out.batch_size_)) {
        throw InvalidArgument("the result for leaf " + quoted(path) + " has shape " +
                              (result.defined() ? shape_str(result.shape()) : std::string("(undefined)")) +
                              ", which does not start with batch_size " + shape_str(out.batch_size_));
      }
      out.append(entry.key, std::move(result));
    }
    path.pop_back();
  }
  return out;
}

TensorTree TensorTree::index(std::int64_t i) const {
  if (batch_size_.empty())
    throw InvalidArgument("index(" + std::to_string(i) + ") of a tree with batch_size []");
  const std::int64_t n = batch_size_[0];
  const std::int64_t row = i < 0 ? i + n : i;
  if (row < 0 || row >= n) {
    throw InvalidArgument("index " + std::to_string(i) + " is out of range for batch_size " +
                          shape_str(batch_size_));
  }
  return transformed([row](const Path&, const Tensor& leaf) { return leaf.select(0, row); },
                     [](const Shape& batch) { return Shape(batch.begin() + 1, batch.end()); });
}

TensorTree TensorTree::slice(std::int64_t dim, const Slice& range) const {
  const std::int64_t start = range.start;
  const std::int64_t stop = range.stop.value_or(std::numeric_limits<std::int64_t>::max());  // none: to the end
  const std::int64_t step = range.step;
  const std::int64_t d = wrapped_dim("slice", dim, batch_dims(), batch_size_);
  if (step <= 0) throw InvalidArgument("slice step must be positive, got " + std::to_string(step));
  const std::int64_t length = sliced_length(batch_size_[static_cast<std::size_t>(d)], start, stop, step);
  return transformed([=](const Path&, const Tensor& leaf) { return leaf.slice(d, range); },
                     [=](const Shape& batch) {
                       Shape out = batch;
                       out[static_cast<std::size_t>(d)] = length;
                       return out;
                     });
}

TensorTree TensorTree::index(const Tensor& rows) const {
  check_row_index(rows, batch_size_);
  const std::int64_t count = rows.numel();
  return transformed([&rows](const Path&, const Tensor& leaf) { return leaf.index_select(0, rows); },
                     [count](const Shape& batch) {
                       Shape out = batch;
                       out[0] = count;
                       return out;
                     });
}

TensorTree TensorTree::apply(const LeafFn& fn) const {
  return transformed([&fn](const Path&, const Tensor& leaf) { return fn(leaf); },
                     [](const Shape& batch) { return batch; });
}

void TensorTree::apply_(const LeafFn& fn) const {
  for_each_leaf([&](const Path& path, const Tensor& leaf) {
    const Tensor result = fn(leaf);
    if (!result.defined() || result.shape() != leaf.shape() || result.dtype() != leaf.dtype()) {
      throw InvalidArgument("apply_: the result for leaf " + describe(path) + " is " +
                            (result.defined()
                                 ? std::string(dtype_name(result.dtype())) + shape_str(result.shape())
                                 : std::string("undefined")) +
                            ", expected " + std::string(dtype_name(leaf.dtype())) + shape_str(leaf.shape()));
    }
    leaf.copy_(result);
  });
}

TensorTree TensorTree::to(Device device) const {
  return apply([device](const Tensor& leaf) { return leaf.to(device); });
}

TensorTree TensorTree::clone() const {
  return apply([](const Tensor& leaf) { return leaf.clone(); });
}

bool TensorTree::equal(const TensorTree& other) const {
  if (batch_size_ != other.batch_size_ || entries_.size() != other.entries_.size()) return false;
  for (const Entry& entry : entries_) {
    const Entry* match = other.find(entry.key);
    if (!match || !match->node != !entry.node) return false;
    const bool same = entry.node ? entry.node->equal(*match->node) : entry.leaf.equal(match->leaf);
    if (!same) return false;
  }
  return true;
}

// ---- stack and cat ---------------------------------------------------------------------------

void TensorTree::check_same_keys(std::span<const TensorTree* const> trees, const Path& path,
                                 const char* operation) {
  const TensorTree& first = *trees[0];
  auto kind = [](const Entry& entry) { return entry.node ? "sub-tree" : "leaf"; };
  for (std::size_t i = 1; i < trees.size(); ++i) {
    const TensorTree& other = *trees[i];
    const std::string tree_i = "tree " + std::to_string(i);
    for (const Entry& entry : first.entries_) {
      const Entry* match = other.find(entry.key);
      if (!match) {
        throw InvalidArgument(std::string(operation) + ": key " + quoted(child_path(path, entry.key)) +
                              " of tree 0 is missing from " + tree_i);
      }
      if (!match->node != !entry.node) {
        throw InvalidArgument(std::string(operation) + ": " + quoted(child_path(path, entry.key)) + " is a " +
                              kind(entry) + " in tree 0 but a " + kind(*match) + " in " + tree_i);
      }
    }
    for (const Entry& entry : other.entries_) {
      if (!first.find(entry.key)) {
        throw InvalidArgument(std::string(operation) + ": key " + quoted(child_path(path, entry.key)) +
                              " of " + tree_i + " is missing from tree 0");
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

// ---- keys: select, exclude, update, flatten ---------------------------------------------------

TensorTree TensorTree::filtered(Path& path, const KeepFn& keep) const {
  TensorTree out(batch_size_);
  for (const Entry& entry : entries_) {
    path.push_back(entry.key);
    const Keep decision = keep(path);
    if (decision == Keep::Descend && entry.node) {
      out.append(entry.key, entry.node->filtered(path, keep));
    } else if (decision != Keep::Drop) {
      if (entry.node) {
        out.append(entry.key, TensorTree(*entry.node));
      } else {
        out.append(entry.key, entry.leaf);
      }
    }
    path.pop_back();
  }
  return out;
}

TensorTree TensorTree::select(const std::vector<Path>& paths) const {
  std::set<Path> chosen;
  std::set<Path> on_the_way;
  for (const Path& path : paths) {
    entry_at(path);  // InvalidArgument naming an absent path
    chosen.insert(path);
    for (std::size_t length = 1; length < path.size(); ++length) {
      on_the_way.emplace(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(length));
    }
  }
  Path path;
  return filtered(path, [&](const Path& at) {
    if (chosen.contains(at)) return Keep::Whole;
    return on_the_way.contains(at) ? Keep::Descend : Keep::Drop;
  });
}

TensorTree TensorTree::select(std::initializer_list<PathRef> paths) const { return select(paths_of(paths)); }

TensorTree TensorTree::exclude(const std::vector<Path>& paths) const {
  const std::set<Path> dropped(paths.begin(), paths.end());
  Path path;
  return filtered(path, [&](const Path& at) { return dropped.contains(at) ? Keep::Drop : Keep::Descend; });
}

TensorTree TensorTree::exclude(std::initializer_list<PathRef> paths) const {
  return exclude(paths_of(paths));
}

TensorTree& TensorTree::update(const TensorTree& other) {
  if (&root() == &other.root()) {
    const TensorTree snapshot(other);  // reading and writing one tree at once would see our own writes
    update_from(snapshot);
  } else {
    update_from(other);
  }
  return *this;
}

void TensorTree::update_from(const TensorTree& other) {
  for (const Entry& entry : other.entries_) {
    Entry* mine = find(entry.key);
    if (entry.node && mine && mine->node) {
      mine->node->update_from(*entry.node);
    } else if (entry.node) {
      set(Path{entry.key}, TensorTree(*entry.node));
    } else {
      set(Path{entry.key}, entry.leaf);
    }
  }
}

TensorTree TensorTree::flatten_keys(char sep) const {
  TensorTree out(batch_size_);
  Path path;
  std::unordered_map<std::string, Path> origins;
  flatten_into(out, path, sep, origins);
  return out;
}

void TensorTree::flatten_into(TensorTree& out, Path& path, char sep,
                              std::unordered_map<std::string, Path>& origins) const {
  for (const Entry& entry : entries_) {
    path.push_back(entry.key);
    if (entry.node && !entry.node->empty()) {
      entry.node->flatten_into(out, path, sep, origins);
    } else {
      std::string key = path_str(path, sep);
      const auto [previous, inserted] = origins.emplace(key, path);
      if (!inserted) {
        throw InvalidArgument("flatten_keys: the entries at " + listed(previous->second) + " and " +
                              listed(path) + " both become key '" + key + "'");
      }
      if (entry.node) {
        out.append(std::move(key), TensorTree(*entry.node));
      } else {
        out.append(std::move(key), entry.leaf);
      }
    }
    path.pop_back();
  }
}

TensorTree TensorTree::unflatten_keys(char sep) const {
  TensorTree out(batch_size_);
  for (const Entry& entry : entries_) {
    Path path = parse_path(entry.key, sep);
    if (path.empty()) path.push_back(entry.key);  // the empty key stays a key
    for (std::size_t length = 1; length <= path.size(); ++length) {
      const Path prefix(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(length));
      if (out.contains(prefix) && (length == path.size() || out.is_leaf(prefix))) {
        throw InvalidArgument("unflatten_keys: key " + describe({entry.key}) + " collides with " +
                              (length == path.size() ? "an earlier key at " : "the leaf ") + quoted(prefix));
      }
    }
    if (entry.node) {
      out.set(path, entry.node->unflatten_keys(sep));
    } else {
      out.set(path, entry.leaf);
    }
  }
  return out;
}

}  // namespace tensortree
