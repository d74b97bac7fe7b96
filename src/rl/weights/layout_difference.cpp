#include "rl/weights/layout_difference.hpp"

#include "core/text_format.hpp"

namespace tensortree::rl {

namespace {

std::string leaf_text(const LeafSpec& leaf) { return fmt::format("{} {}", leaf.dtype, leaf.shape); }

std::string leaf_difference(const Schema& offered, const Schema& published) {
  for (const LeafSpec& leaf : offered.leaves()) {
    const LeafSpec* other = published.find_leaf(leaf.path);
    if (other == nullptr) return fmt::format("leaf '{}' is not in the publication", path_str(leaf.path));
    if (other->dtype != leaf.dtype || other->shape != leaf.shape) {
      return fmt::format("leaf '{}' is {} here, {} in the publication", path_str(leaf.path), leaf_text(leaf),
                         leaf_text(*other));
    }
  }
  for (const LeafSpec& leaf : published.leaves()) {
    if (offered.find_leaf(leaf.path) == nullptr) {
      return fmt::format("leaf '{}' of the publication is missing here", path_str(leaf.path));
    }
  }
  return {};
}

std::string node_difference(const Schema& offered, const Schema& published) {
  for (const NodeSpec& node : offered.nodes()) {
    const NodeSpec* other = published.find_node(node.path);
    if (other == nullptr) return fmt::format("node '{}' is not in the publication", path_str(node.path));
    if (other->batch_size != node.batch_size) {
      return fmt::format("node '{}' has batch_size {} here, {} in the publication", path_str(node.path),
                         node.batch_size, other->batch_size);
    }
  }
  return {};
}

}  // namespace

std::string layout_difference(const Schema& offered, const Schema& published) {
  if (offered.fingerprint() == published.fingerprint()) return {};
  std::string difference = leaf_difference(offered, published);
  if (difference.empty()) difference = node_difference(offered, published);
  if (difference.empty()) {
    difference = fmt::format("fingerprint {:#018x} here, {:#018x} in the publication", offered.fingerprint(),
                             published.fingerprint());
  }
  return difference;
}

}  // namespace tensortree::rl
