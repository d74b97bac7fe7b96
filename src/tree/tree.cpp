// TensorTree core: entries, key paths, batch_size checks and consolidation state.
#include "tensortree/tree.hpp"

#include <algorithm>
#include <utility>

#include "tensortree/error.hpp"

namespace tensortree {

namespace {

void check_not_root(const Path& path, const char* operation) {
  if (path.empty()) {
    throw InvalidArgument(std::string(operation) + " needs a key; the empty path names the tree itself");
  }
}

Path prefix_of(const Path& path, std::size_t length) {
  return Path(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(length));
}

}  // namespace

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
  source.index_.clear();
  if (source.parent_) {
    batch_size_ = source.batch_size_;
    source.drop_consolidation();
  } else {
    batch_size_ = std::move(source.batch_size_);
    source.batch_size_.clear();
    storage_ = std::move(source.storage_);
    schema_ = std::move(source.schema_);
  }
  adopt_children();
}

void TensorTree::replace_with(TensorTree&& root_source) {
  if (parent_) check_child_fits({}, root_source.batch_size_, parent_->batch_size_);
  take_contents(std::move(root_source));
  if (parent_) {
    storage_.reset();
    schema_.reset();
    drop_consolidation();
  }
}

void TensorTree::adopt_children() {
  for (Entry& entry : entries_) {
    if (entry.node) entry.node->parent_ = this;
  }
}

// Structural changes anywhere reach the root through the parent links, so a stale buffer is
// released at once rather than detected later.
void TensorTree::drop_consolidation() {
  TensorTree* node = this;
  while (node->parent_) node = node->parent_;
  node->storage_.reset();
  node->schema_.reset();
}

void TensorTree::attach_consolidation(StoragePtr storage, std::shared_ptr<const Schema> schema) {
  if (parent_) throw InvalidArgument("only a root tree holds consolidation state, not " + describe({}));
  if (!storage || !schema) throw InvalidArgument("attach_consolidation needs a storage and a schema");
  storage_ = std::move(storage);
  schema_ = std::move(schema);
}

// ---- locating nodes --------------------------------------------------------------------------

const TensorTree& TensorTree::root() const {
  const TensorTree* node = this;
  while (node->parent_) node = node->parent_;
  return *node;
}

bool TensorTree::is_ancestor_of(const TensorTree& node) const {
  for (const TensorTree* up = node.parent_; up; up = up->parent_) {
    if (up == this) return true;
  }
  return false;
}

Path TensorTree::location() const {
  Path path;
  for (const TensorTree* node = this; node->parent_; node = node->parent_) {
    for (const Entry& entry : node->parent_->entries_) {
      if (entry.node.get() == node) {
        path.push_back(entry.key);
        break;
      }
    }
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::string TensorTree::describe(const Path& relative) const {
  Path full = location();
  full.insert(full.end(), relative.begin(), relative.end());
  if (full.empty()) return "the root";
  // Appended rather than "'" + string: g++ 12 warns falsely on that form (-Wrestrict, PR105651).
  std::string text = "'";
  text += path_str(full);
  text += '\'';
  return text;
}

std::string TensorTree::keys_hint() const {
  constexpr std::size_t kShown = 8;
  std::string hint = "[";
  for (std::size_t i = 0; i < entries_.size() && i < kShown; ++i) {
    if (i) hint += ", ";
    hint += "'" + entries_[i].key + "'";
  }
  if (entries_.size() > kShown) hint += ", ... " + std::to_string(entries_.size() - kShown) + " more";
  return hint + "]";
}

std::optional<std::size_t> TensorTree::position_of(const std::string& key) const {
  if (index_.empty()) {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].key == key) return i;
    }
    return std::nullopt;
  }
  const auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

const TensorTree::Entry* TensorTree::find(const std::string& key) const {
  const auto position = position_of(key);
  return position ? &entries_[*position] : nullptr;
}

TensorTree::Entry* TensorTree::find(const std::string& key) {
  const auto position = position_of(key);
  return position ? &entries_[*position] : nullptr;
}

// Small nodes are scanned, which beats hashing and keeps copies of a tree free of one heap node
// per key; a node that grows past kIndexedEntries gets a hash index.
void TensorTree::reindex() {
  index_.clear();
  if (entries_.size() < kIndexedEntries) return;
  index_.reserve(entries_.size());
  for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].key, i);
}

const TensorTree::Entry& TensorTree::entry_at(const Path& path) const {
  check_not_root(path, "a lookup");
  const TensorTree* node = this;
  for (std::size_t i = 0;; ++i) {
    const Entry* entry = node->find(path[i]);
    if (!entry) {
      throw InvalidArgument("no key " + describe(prefix_of(path, i + 1)) + " in the tree; " +
                            node->describe({}) + " has keys " + node->keys_hint());
    }
    if (i + 1 == path.size()) return *entry;
    if (!entry->node) {
      throw InvalidArgument("no key " + describe(path) + " in the tree: " + describe(prefix_of(path, i + 1)) +
                            " is a leaf, not a sub-tree");
    }
    node = entry->node.get();
  }
}

// The deepest existing node on the way to path's last key; InvalidArgument if a leaf is in the way.
const TensorTree& TensorTree::deepest_node_on(const Path& path) const {
  const TensorTree* node = this;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    const Entry* entry = node->find(path[i]);
    if (!entry) return *node;
    if (!entry->node) {
      throw InvalidArgument("cannot set " + describe(path) + ": " + describe(prefix_of(path, i + 1)) +
                            " is a leaf, not a sub-tree");
    }
    node = entry->node.get();
  }
  return *node;
}

// The node that will hold path's last key, creating missing nodes with their parent's batch_size.
TensorTree& TensorTree::node_for_insert(const Path& path) {
  TensorTree* node = this;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    if (!node->find(path[i])) node->append(path[i], TensorTree(node->batch_size_));
    node = node->find(path[i])->node.get();
  }
  return *node;
}

TensorTree::Entry& TensorTree::upsert(const std::string& key) {
  if (Entry* existing = find(key)) return *existing;
  return push_entry({key, Tensor{}, nullptr});
}

TensorTree::Entry& TensorTree::push_entry(Entry entry) {
  entries_.push_back(std::move(entry));
  try {
    if (entries_.size() == kIndexedEntries) {
      reindex();
    } else if (entries_.size() > kIndexedEntries) {
      index_.emplace(entries_.back().key, entries_.size() - 1);
    }
  } catch (...) {
    entries_.pop_back();
    index_.clear();
    throw;
  }
  return entries_.back();
}

void TensorTree::append(std::string key, Tensor leaf) {
  push_entry({std::move(key), std::move(leaf), nullptr});
}

void TensorTree::append(std::string key, TensorTree subtree) {
  auto node = std::make_unique<TensorTree>(std::move(subtree));
  node->storage_.reset();  // only a root holds consolidation state
  node->schema_.reset();
  node->parent_ = this;
  push_entry({std::move(key), Tensor{}, std::move(node)});
}

// ---- batch_size checks -----------------------------------------------------------------------

void TensorTree::check_child_fits(const Path& path, const Shape& child_batch,
                                  const Shape& parent_batch) const {
  if (!starts_with(child_batch, parent_batch)) {
    throw InvalidArgument("sub-tree " + describe(path) + " has batch_size " + shape_str(child_batch) +
                          ", which does not start with its parent's batch_size " + shape_str(parent_batch));
  }
}

void TensorTree::check_leaf_fits(const Path& path, const Tensor& leaf, const Shape& node_batch) const {
  if (!leaf.defined()) throw InvalidArgument("leaf " + describe(path) + " is an undefined tensor");
  if (!starts_with(leaf.shape(), node_batch)) {
    throw InvalidArgument("leaf " + describe(path) + " has shape " + shape_str(leaf.shape()) +
                          ", which does not start with its node's batch_size " + shape_str(node_batch));
  }
}

// ---- entries ---------------------------------------------------------------------------------

void TensorTree::set(PathRef path_ref, Tensor leaf) {
  const Path& path = path_ref.path();
  check_not_root(path, "set");
  // Validated before anything changes: missing nodes would inherit the deepest node's batch_size.
  check_leaf_fits(path, leaf, deepest_node_on(path).batch_size_);
  Entry& entry = node_for_insert(path).upsert(path.back());
  entry.leaf = std::move(leaf);
  entry.node.reset();
  drop_consolidation();
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
  drop_consolidation();
}

void TensorTree::set_(PathRef path, const Tensor& src) const {
  const Tensor& leaf = get(path);
  if (!src.defined() || src.shape() != leaf.shape() || src.dtype() != leaf.dtype()) {
    throw InvalidArgument("set_ " + describe(path) + " expects " + std::string(dtype_name(leaf.dtype())) +
                          shape_str(leaf.shape()) + ", got " +
                          (src.defined() ? std::string(dtype_name(src.dtype())) + shape_str(src.shape())
                                         : "an undefined tensor"));
  }
  leaf.copy_(src);
}

const Tensor& TensorTree::get(PathRef path) const {
  const Entry& entry = entry_at(path);
  if (entry.node) throw InvalidArgument(describe(path) + " is a sub-tree, not a leaf; use subtree()");
  return entry.leaf;
}

const TensorTree& TensorTree::subtree(PathRef path) const {
  if (path.path().empty()) return *this;
  const Entry& entry = entry_at(path);
  if (!entry.node) throw InvalidArgument(describe(path) + " is a leaf, not a sub-tree; use get()");
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
  drop_consolidation();
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
      throw InvalidArgument("set_batch_size(" + shape_str(batch_size) + ") of " + describe({}) + ": " +
                            (entry.node ? "sub-tree " : "leaf ") + describe({entry.key}) + " has " +
                            (entry.node ? "batch_size " : "shape ") + shape_str(shape));
    }
  }
  batch_size_ = std::move(batch_size);
  drop_consolidation();
}

std::optional<Device> TensorTree::device() const {
  std::optional<Device> found;
  bool mixed = false;
  for_each_leaf([&](const Path&, const Tensor& leaf) {
    if (!found) {
      found = leaf.device();
    } else if (*found != leaf.device()) {
      mixed = true;
    }
  });
  return mixed ? std::nullopt : found;
}

}  // namespace tensortree
