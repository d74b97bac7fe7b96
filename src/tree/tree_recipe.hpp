// How to build a tree of views from a Schema, worked out once per schema and kept: each node's
// entries in insertion order, each a leaf of the schema or a child node, and the key index of each
// wide node, which every tree built from the recipe shares until it changes its keys. A receiver
// that makes a new tree from every message of one layout then looks no path up and builds no hash
// node: a view and an entry per leaf.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensortree/schema.hpp"

namespace tensortree::detail {

struct TreeRecipe {
  struct Entry {
    const std::string* key;  // in the schema's NodeSpec
    bool is_leaf;
    std::uint32_t index;  // into schema->leaves(), or into nodes
  };
  struct Node {
    const NodeSpec* spec;
    std::vector<Entry> entries;
    std::shared_ptr<std::unordered_map<std::string, std::size_t>> index;  // wide nodes only
  };
  std::shared_ptr<const Schema> schema;  // keeps the keys and specs alive
  std::vector<Node> nodes;               // [0] is the root
};

// The recipe for `schema`: this thread's cached one when it built from this schema lately.
std::shared_ptr<const TreeRecipe> recipe_for(const std::shared_ptr<const Schema>& schema,
                                             std::size_t indexed_entries);

}  // namespace tensortree::detail
