// Building trees from plain C++ containers (from_map, from_nested) and listing them (items).
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

std::vector<std::pair<Path, Tensor>> TensorTree::items() const { return leaves(); }

TensorTree TensorTree::from_map(Shape batch_size, const std::map<std::string, Tensor>& leaves) {
  TensorTree out(std::move(batch_size));
  for (const auto& [path, leaf] : leaves) out.set(path, leaf);
  return out;
}

void TensorTree::build_from(const std::vector<TreeInit>& entries) {
  for (const TreeInit& entry : entries) {
    if (contains(Path{entry.key})) {
      throw InvalidArgument(fmt::format("from_nested: key {} appears twice", describe({entry.key})));
    }
    if (entry.is_node) {
      TensorTree node(batch_size_);
      node.build_from(entry.children);
      set(Path{entry.key}, std::move(node));
    } else {
      set(Path{entry.key}, entry.leaf);
    }
  }
}

TensorTree TensorTree::from_nested(Shape batch_size, std::initializer_list<TreeInit> entries) {
  TensorTree out(std::move(batch_size));
  out.build_from(std::vector<TreeInit>(entries));
  return out;
}

}  // namespace tensortree
