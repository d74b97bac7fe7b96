#include "tree/layout_difference.hpp"

#include "core/text_format.hpp"

namespace tensortree::detail {

namespace {

constexpr std::string_view kAbsent = "no such key";

std::string leaf_text(const LeafSpec& leaf) { return fmt::format("{} {}", leaf.dtype, leaf.shape); }
std::string node_text(const NodeSpec& node) { return fmt::format("batch_size {}", node.batch_size); }

std::optional<LayoutDifference> leaf_difference(const Schema& here, const Schema& there) {
  for (const LeafSpec& leaf : here.leaves()) {
    const PathView path = here.path_of(leaf);
    const LeafSpec* other = there.find_leaf(path);
    if (other == nullptr) {
      const NodeSpec* node = there.find_node(path);
      return LayoutDifference{path_str(path), leaf_text(leaf), node ? node_text(*node) : std::string(kAbsent)};
    }
    if (other->dtype != leaf.dtype || other->shape != leaf.shape) {
      return LayoutDifference{path_str(path), leaf_text(leaf), leaf_text(*other)};
    }
  }
  for (const LeafSpec& leaf : there.leaves()) {
    const PathView path = there.path_of(leaf);
    if (here.find_leaf(path) == nullptr) {
      const NodeSpec* node = here.find_node(path);
      return LayoutDifference{path_str(path), node ? node_text(*node) : std::string(kAbsent), leaf_text(leaf)};
    }
  }
  return std::nullopt;
}

std::optional<LayoutDifference> node_difference(const Schema& here, const Schema& there) {
  for (const NodeSpec& node : here.nodes()) {
    const NodeSpec* other = there.find_node(node.path);
    if (other == nullptr) return LayoutDifference{path_str(node.path), node_text(node), std::string(kAbsent)};
    if (other->batch_size != node.batch_size) {
      return LayoutDifference{path_str(node.path), node_text(node), node_text(*other)};
    }
  }
  for (const NodeSpec& node : there.nodes()) {
    if (here.find_node(node.path) == nullptr) {
      return LayoutDifference{path_str(node.path), std::string(kAbsent), node_text(node)};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<LayoutDifference> first_difference(const Schema& here, const Schema& there) {
  if (here.fingerprint() == there.fingerprint()) return std::nullopt;
  if (auto leaf = leaf_difference(here, there)) return leaf;
  return node_difference(here, there);
}

std::string difference_text(const Schema& here, const Schema& there, std::string_view there_name) {
  const std::optional<LayoutDifference> difference = first_difference(here, there);
  if (!difference) return {};
  return fmt::format("at key '{}': {} {}, {} here", difference->key, difference->there, there_name, difference->here);
}

}  // namespace tensortree::detail
