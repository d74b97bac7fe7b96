// The bodies of TensorTree's member templates: for_each_leaf and for_each_node, depth-first in
// insertion order, with one Path reused along the walk.
#pragma once

#include "tensortree/path.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

template <class Fn>
void TensorTree::for_each_leaf(Fn&& fn) const {
  Path path;
  visit_leaves(path, fn);
}

template <class Fn>
void TensorTree::for_each_node(Fn&& fn) const {
  Path path;
  visit_nodes(path, fn);
}

template <class Fn>
void TensorTree::visit_leaves(Path& path, Fn& fn) const {
  for (const Entry& entry : entries_) {
    path.push_back(entry.key);
    if (entry.node) {
      entry.node->visit_leaves(path, fn);
    } else {
      fn(static_cast<const Path&>(path), entry.leaf);
    }
    path.pop_back();
  }
}

template <class Fn>
void TensorTree::visit_nodes(Path& path, Fn& fn) const {
  fn(static_cast<const Path&>(path), *this);
  for (const Entry& entry : entries_) {
    if (!entry.node) continue;
    path.push_back(entry.key);
    entry.node->visit_nodes(path, fn);
    path.pop_back();
  }
}

}  // namespace tensortree
