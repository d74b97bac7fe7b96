// The one friend of TensorTree: the consolidation code reads and builds trees through their
// entries directly, because doing it through the public API would build a Path per leaf and
// re-check every batch size that the schema has already validated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tree/layout_plan.hpp"
#include "tree/tree_packing.hpp"
#include "tree/tree_recipe.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"

namespace tensortree::detail {

// The packing half of consolidate(): `tree`'s leaves in a buffer laid out by the tree's cached plan
// (options.reuse when it fits, else a new buffer with kWireHeaderBytes spare behind the payload, so
// that a send can put its wire header there without a copy).
struct PackedTree {
  StoragePtr storage;
  std::shared_ptr<const LayoutPlan> plan;
};
PackedTree pack_tree(const TensorTree& tree, const ConsolidateOptions& options);

// pack_tree() in two halves, for a caller that needs the layout before it has a buffer (a send
// packs into a pooled buffer of the payload's size). The packing is the tree's cached one while its
// structure version is unchanged (tree_packing.hpp), else a walk makes it. NotSupported naming `op`
// when the leaves are on more than one device.
struct WalkedTree {
  std::shared_ptr<const TreePacking> packing;
  Device target;  // where the buffer goes: options.device, else the leaves' device
  std::shared_ptr<const LayoutPlan> plan;
};
WalkedTree walk_for_packing(const TensorTree& tree, const ConsolidateOptions& options, std::string_view op);
PackedTree pack_walked(const WalkedTree& walked, const ConsolidateOptions& options);

struct ConsolidationAccess {
  // Appends `node`'s structure to walk.structure and its leaves to walk.leaves, depth first.
  static void describe(const TensorTree& node, TreeWalk& walk);
  static std::vector<std::string> direct_keys(const TensorTree& node);

  // A tree shaped like `source` whose leaves are views of `storage` at `offsets` (depth-first order).
  static TensorTree views_like(const TensorTree& source, const StoragePtr& storage,
                               std::span<const std::uint64_t> offsets);
  // A tree built from the schema alone, leaves viewing `storage`, keys in their recorded order
  // (from the schema's cached recipe: tree_recipe.hpp).
  static TensorTree views_from_schema(const std::shared_ptr<const Schema>& schema, const StoragePtr& storage);

  static void attach(TensorTree& root, StoragePtr storage, std::shared_ptr<const Schema> schema) {
    root.attach_consolidation(std::move(storage), std::move(schema));
  }

  // Whether anything besides the consolidated `root` and its own leaves holds its buffer: a copy of
  // the tree, a leaf or sub-tree taken out of it, a send in flight from it.
  static bool buffer_shared(const TensorTree& root);
  // Points every leaf of the consolidated `root` at the same bytes of `storage` (at least as large,
  // on the same device), which becomes the tree's buffer; whoever held the old one keeps it.
  static void rebind(TensorTree& root, StoragePtr storage);
  // The storages `node`'s leaves view, depth first, a run of leaves on one storage listed once:
  // what keeps the bytes a queued kernel reads alive, without a copy of the tree's nodes.
  static void leaf_storages(const TensorTree& node, std::vector<StoragePtr>& out);

 private:
  static void copy_views(const TensorTree& source, TensorTree& target, const StoragePtr& storage,
                         std::span<const std::uint64_t> offsets, std::size_t& next_leaf);
  static long holders_in(const TensorTree& node, const Storage* storage);
  static void rebind_leaves(TensorTree& node, const StoragePtr& storage);
  static void build_from_recipe(const TreeRecipe& recipe, std::size_t node, TensorTree& target,
                                const StoragePtr& storage);
};

}  // namespace tensortree::detail
