#include "tree/tree_recipe.hpp"

#include <algorithm>
#include <array>

#include "core/recently_used.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/path.hpp"

namespace tensortree::detail {

namespace {

// A receiver sees few layouts at a time (one per sender, or per kind of message).
constexpr std::size_t kCachedRecipes = 4;

// Appends the node at `spec` (and, after it, its descendants) to the recipe; returns its index.
std::uint32_t add_node(TreeRecipe& recipe, const NodeSpec& spec, std::size_t indexed_entries) {
  const auto index = static_cast<std::uint32_t>(recipe.nodes.size());
  recipe.nodes.push_back({&spec, {}, nullptr});
  std::vector<TreeRecipe::Entry> entries;
  entries.reserve(spec.keys.size());
  Path child_path = spec.path;
  const Schema& schema = *recipe.schema;
  for (const std::string& key : spec.keys) {
    child_path.push_back(key);
    if (const LeafSpec* leaf = schema.find_leaf(child_path)) {
      entries.push_back({&key, true, static_cast<std::uint32_t>(leaf - schema.leaves().data())});
    } else if (const NodeSpec* child = schema.find_node(child_path)) {
      entries.push_back({&key, false, add_node(recipe, *child, indexed_entries)});
    } else {
      throw InvalidArgument(fmt::format("the schema names key '{}' of node '{}' but holds no leaf or node there", key,
                                        path_str(spec.path)));
    }
    child_path.pop_back();
  }
  TreeRecipe::Node& node = recipe.nodes[index];  // after the recursion: nodes may have moved
  node.entries = std::move(entries);
  if (node.entries.size() >= indexed_entries) {
    node.index = std::make_shared<std::unordered_map<std::string, std::size_t>>();
    node.index->reserve(node.entries.size());
    for (std::size_t i = 0; i < node.entries.size(); ++i) node.index->emplace(*node.entries[i].key, i);
  }
  return index;
}

}  // namespace

std::shared_ptr<const TreeRecipe> recipe_for(const std::shared_ptr<const Schema>& schema,
                                             std::size_t indexed_entries) {
  thread_local RecentlyUsed<TreeRecipe, kCachedRecipes> cache;
  if (auto cached = cache.find([&](const TreeRecipe& recipe) { return recipe.schema == schema; })) return cached;
  auto recipe = std::make_shared<TreeRecipe>();
  recipe->schema = schema;
  recipe->nodes.reserve(schema->nodes().size());
  add_node(*recipe, *schema->find_node(Path{}), indexed_entries);
  cache.add(recipe);
  return recipe;
}

}  // namespace tensortree::detail
