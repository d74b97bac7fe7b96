// TensorTree's nodes by path: locating a node in its tree, looking entries up (with a key index for
// wide nodes), and the insert paths that set() builds on.
#include <iterator>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/path_text.hpp"

namespace tensortree {

using detail::check_not_root;
using detail::prefix_of;

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
  return detail::quoted(full);
}

std::string TensorTree::keys_hint() const {
  constexpr std::size_t kShown = 8;
  fmt::memory_buffer hint;
  fmt::format_to(std::back_inserter(hint), "[");
  for (std::size_t i = 0; i < entries_.size() && i < kShown; ++i) {
    fmt::format_to(std::back_inserter(hint), "{}'{}'", i ? ", " : "", entries_[i].key);
  }
  if (entries_.size() > kShown) fmt::format_to(std::back_inserter(hint), ", ... {} more", entries_.size() - kShown);
  fmt::format_to(std::back_inserter(hint), "]");
  return fmt::to_string(hint);
}

std::optional<std::size_t> TensorTree::position_of(const std::string& key) const {
  if (!index_) {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].key == key) return i;
    }
    return std::nullopt;
  }
  const auto it = index_->find(key);
  if (it == index_->end()) return std::nullopt;
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
  index_.reset();
  if (entries_.size() < kIndexedEntries) return;
  auto index = std::make_shared<KeyIndex>();
  index->reserve(entries_.size());
  for (std::size_t i = 0; i < entries_.size(); ++i) index->emplace(entries_[i].key, i);
  index_ = std::move(index);
}

const TensorTree::Entry& TensorTree::entry_at(const Path& path) const {
  check_not_root(path, "a lookup");
  const TensorTree* node = this;
  for (std::size_t i = 0;; ++i) {
    const Entry* entry = node->find(path[i]);
    if (!entry) {
      throw InvalidArgument(fmt::format("no key {} in the tree; {} has keys {}", describe(prefix_of(path, i + 1)),
                                        node->describe({}), node->keys_hint()));
    }
    if (i + 1 == path.size()) return *entry;
    if (!entry->node) {
      throw InvalidArgument(fmt::format("no key {} in the tree: {} is a leaf, not a sub-tree", describe(path),
                                        describe(prefix_of(path, i + 1))));
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
      throw InvalidArgument(fmt::format("cannot set {}: {} is a leaf, not a sub-tree", describe(path),
                                        describe(prefix_of(path, i + 1))));
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
  if (entries_.size() < kIndexedEntries) return entries_.back();
  try {
    if (!index_ || index_.use_count() > 1) {
      reindex();  // a shared index stays as its other holders know it
    } else {
      index_->emplace(entries_.back().key, entries_.size() - 1);
    }
  } catch (...) {
    entries_.pop_back();
    index_.reset();  // lookups scan until the next insert builds the index again
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

}  // namespace tensortree
