// TensorTree core: construction, entries, batch_size checks and consolidation state. Finding and
// inserting nodes by path is in tree_nodes.cpp.
#include "tensortree/tree.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tree/path_text.hpp"

namespace tensortree {

using detail::check_not_root;
using detail::prefix_of;

// ---- construction, copy and move ---------------------------------------------------------------

TensorTree::TensorTree(Shape batch_size) : batch_size_(std::move(batch_size)) {
  numel_of(batch_size_);  // rejects negative dimensions
}

TensorTree::TensorTree(Shape batch_size, std::initializer_list<std::pair<PathRef, Tensor>> leaves)
    : TensorTree(std::move(batch_size)) {
  for (const auto& [path, leaf] : leaves) set(path, leaf);
}

TensorTree::TensorTree(const TensorTree& other) : index_(other.index_), batch_size_(other.batch_size_) {
  // A copied root stays consolidated: its leaves are the same views into the same buffer.
  if (!other.parent_) {
    storage_ = other.storage_;
    schema_ = other.schema_;
  }
  entries_.reserve(other.entries_.size());
  for (const Entry& entry : other.entries_) {
    entries_.push_back(
        {entry.key, entry.leaf, entry.node ? std::make_unique<TensorTree>(*entry.node) : nullptr});
  }
  adopt_children();
}

TensorTree::TensorTree(TensorTree&& other) noexcept { take_contents(std::move(other)); }

TensorTree& TensorTree::operator=(const TensorTree& other) {
  if (this != &other) replace_with(TensorTree(other));
  return *this;
}

TensorTree& TensorTree::operator=(TensorTree&& other) {
  if (this == &other) return *this;
  // Moving an ancestor into its own descendant would make the node own itself: copy it instead.
  replace_with(other.is_ancestor_of(*this) ? TensorTree(other) : TensorTree(std::move(other)));
  return *this;
}

TensorTree::~TensorTree() = default;

// A source inside a tree stays there as an empty node that keeps its batch_size (its parent's
// invariant depends on it; copying those few integers is the one allocation a move can make), and
// that tree loses its consolidation.
void TensorTree::take_contents(TensorTree&& source) {
  entries_ = std::move(source.entries_);
  index_ = std::move(source.index_);
  source.entries_.clear();
  source.index_.reset();
  if (source.parent_) {
    batch_size_ = source.batch_size_;
    source.structure_changed();
  } else {
    batch_size_ = std::move(source.batch_size_);
    source.batch_size_.clear();
    storage_ = std::move(source.storage_);
    schema_ = std::move(source.schema_);
    source.bump_structure_version();
  }
  bump_structure_version();
  adopt_children();
}

void TensorTree::replace_with(TensorTree&& root_source) {
  if (parent_) check_child_fits({}, root_source.batch_size_, parent_->batch_size_);
  take_contents(std::move(root_source));
  if (parent_) {
    storage_.reset();
    schema_.reset();
    structure_changed();
  }
}

void TensorTree::adopt_children() {
  for (Entry& entry : entries_) {
    if (entry.node) entry.node->parent_ = this;
  }
}

std::uint64_t TensorTree::fresh_structure_version() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Fresh numbers rather than increments: a tree built later at the same address, or a copy changed
// on its own, can never show a version that a cached plan was made for.
void TensorTree::bump_structure_version() {
  for (TensorTree* node = this; node; node = node->parent_) node->structure_version_ = fresh_structure_version();
}

// Structural changes anywhere reach the root through the parent links, so a stale buffer is
// released at once rather than detected later.
void TensorTree::structure_changed() {
  bump_structure_version();
  TensorTree* node = this;
  while (node->parent_) node = node->parent_;
  node->storage_.reset();
  node->schema_.reset();
}

void TensorTree::attach_consolidation(StoragePtr storage, std::shared_ptr<const Schema> schema) {
  if (parent_) throw InvalidArgument(fmt::format("only a root tree holds consolidation state, not {}", describe({})));
  if (!storage || !schema) throw InvalidArgument("attach_consolidation needs a storage and a schema");
  storage_ = std::move(storage);
  schema_ = std::move(schema);
}

// ---- batch_size checks -----------------------------------------------------------------------

void TensorTree::check_child_fits(const Path& path, const Shape& child_batch,
                                  const Shape& parent_batch) const {
  if (!starts_with(child_batch, parent_batch)) {
    throw InvalidArgument(fmt::format("sub-tree {} has batch_size {}, which does not start with its parent's "
                                      "batch_size {}", describe(path), shape_str(child_batch),
                                      shape_str(parent_batch)));
  }
}

void TensorTree::check_leaf_fits(const Path& path, const Tensor& leaf, const Shape& node_batch) const {
  if (!leaf.defined()) throw InvalidArgument(fmt::format("leaf {} is an undefined tensor", describe(path)));
  if (!starts_with(leaf.shape(), node_batch)) {
    throw InvalidArgument(fmt::format("leaf {} has shape {}, which does not start with its node's batch_size {}",
                                      describe(path), shape_str(leaf.shape()), shape_str(node_batch)));
  }
}

// ---- entries ---------------------------------------------------------------------------------

void TensorTree::set(PathRef path_ref, Tensor leaf) {
  const Path& path = path_ref.path();
  check_not_root(path, "set");
  // Validated before anything changes: missing nodes would inherit the deepest node's batch_size.
  check_leaf_fits(path, leaf, deepest_node_on(path).batch_size_);
  TensorTree& node = node_for_insert(path);
  Entry& entry = node.upsert(path.back());
  entry.leaf = std::move(leaf);
  entry.node.reset();
  node.structure_changed();
}

void TensorTree::set(PathRef path_ref, TensorTree subtree) {
  const Path& path = path_ref.path();
  check_not_root(path, "set");
  check_child_fits(path, subtree.batch_size_, deepest_node_on(path).batch_size_);
  TensorTree& node = node_for_insert(path);
  auto child = std::make_unique<TensorTree>(std::move(subtree));
  child->storage_.reset();
  child->schema_.reset();
  child->parent_ = &node;
  Entry& entry = node.upsert(path.back());
  entry.leaf = Tensor{};
  entry.node = std::move(child);
  node.structure_changed();
}

void TensorTree::set_(PathRef path, const Tensor& src) const {
  const Tensor& leaf = get(path);
  if (!src.defined() || src.shape() != leaf.shape() || src.dtype() != leaf.dtype()) {
    const std::string got =
        src.defined() ? fmt::format("{}{}", src.dtype(), shape_str(src.shape())) : std::string("an undefined tensor");
    throw InvalidArgument(
        fmt::format("set_ {} expects {}{}, got {}", describe(path), leaf.dtype(), shape_str(leaf.shape()), got));
  }
  leaf.copy_(src);
}

const Tensor& TensorTree::get(PathRef path) const {
  const Entry& entry = entry_at(path);
  if (entry.node) throw InvalidArgument(fmt::format("{} is a sub-tree, not a leaf; use subtree()", describe(path)));
  return entry.leaf;
}

const TensorTree& TensorTree::subtree(PathRef path) const {
  if (path.path().empty()) return *this;
  const Entry& entry = entry_at(path);
  if (!entry.node) throw InvalidArgument(fmt::format("{} is a leaf, not a sub-tree; use get()", describe(path)));
  return *entry.node;
}

TensorTree& TensorTree::subtree(PathRef path) {
  return const_cast<TensorTree&>(std::as_const(*this).subtree(std::move(path)));
}

bool TensorTree::contains(PathRef path_ref) const {
  const Path& path = path_ref.path();
  if (path.empty()) return false;
  const TensorTree* node = this;
  for (std::size_t i = 0;; ++i) {
    const Entry* entry = node->find(path[i]);
    if (!entry) return false;
    if (i + 1 == path.size()) return true;
    if (!entry->node) return false;
    node = entry->node.get();
  }
}

bool TensorTree::is_leaf(PathRef path) const { return !entry_at(path).node; }

void TensorTree::erase(PathRef path_ref) {
  const Path& path = path_ref.path();
  entry_at(path);  // InvalidArgument naming the path when absent
  TensorTree& node = subtree(prefix_of(path, path.size() - 1));
  const std::size_t position = *node.position_of(path.back());
  node.entries_.erase(node.entries_.begin() + static_cast<std::ptrdiff_t>(position));
  node.reindex();
  node.structure_changed();
}

std::vector<Path> TensorTree::keys(const KeysOptions& options) const {
  std::vector<Path> out;
  Path prefix;
  collect_keys(prefix, options.include_nested, options.leaves_only, out);
  return out;
}

void TensorTree::collect_keys(Path& prefix, bool include_nested, bool leaves_only,
                              std::vector<Path>& out) const {
  for (const Entry& entry : entries_) {
    prefix.push_back(entry.key);
    if (entry.node && include_nested) entry.node->collect_keys(prefix, include_nested, leaves_only, out);
    if (!entry.node || !leaves_only) out.push_back(prefix);
    prefix.pop_back();
  }
}

std::vector<std::pair<Path, Tensor>> TensorTree::leaves() const {
  std::vector<std::pair<Path, Tensor>> out;
  for_each_leaf([&out](const Path& path, const Tensor& leaf) { out.emplace_back(path, leaf); });
  return out;
}

// ---- batch_size and device -------------------------------------------------------------------

void TensorTree::set_batch_size(Shape batch_size) {
  numel_of(batch_size);
  if (parent_) check_child_fits({}, batch_size, parent_->batch_size_);
  for (const Entry& entry : entries_) {
    const Shape& shape = entry.node ? entry.node->batch_size_ : entry.leaf.shape();
    if (!starts_with(shape, batch_size)) {
      throw InvalidArgument(fmt::format("set_batch_size({}) of {}: {}{} has {}{}", shape_str(batch_size), describe({}),
                                        entry.node ? "sub-tree " : "leaf ", describe({entry.key}),
                                        entry.node ? "batch_size " : "shape ", shape_str(shape)));
    }
  }
  batch_size_ = std::move(batch_size);
  structure_changed();
}

std::optional<Device> TensorTree::device() const {
  // Over the entries directly: for_each_leaf would build a Path for every leaf.
  std::optional<Device> found;
  bool mixed = false;
  auto visit = [&](const TensorTree& node, auto& self) -> void {
    for (const Entry& entry : node.entries_) {
      if (mixed) return;
      if (entry.node) {
        self(*entry.node, self);
      } else if (!found) {
        found = entry.leaf.device();
      } else if (*found != entry.leaf.device()) {
        mixed = true;
      }
    }
  };
  visit(*this, visit);
  return mixed ? std::nullopt : found;
}

}  // namespace tensortree
