// The arguments of TensorTree's methods that are structs: TreeInit (from_nested's entries),
// KeysOptions (keys()) and ConsolidateOptions (consolidate() and its kin).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensortree/device.hpp"
#include "tensortree/export.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

// One entry of TensorTree::from_nested: a leaf, or a sub-tree of entries that takes its parent's
// batch_size. {"obs", obs}, {"next", {{"obs", next_obs}, {"reward", reward}}}.
struct TT_API TreeInit {
  TreeInit(std::string key, Tensor leaf) : key(std::move(key)), leaf(std::move(leaf)) {}
  TreeInit(std::string key, std::initializer_list<TreeInit> children)
      : key(std::move(key)), children(children), is_node(true) {}

  std::string key;
  Tensor leaf;
  std::vector<TreeInit> children;
  bool is_node = false;
};

// What keys() lists (TensorDict's keys(include_nested, leaves_only), named).
struct KeysOptions {
  bool include_nested = false;
  bool leaves_only = false;
};

struct ConsolidateOptions {
  std::optional<Device> device = {};  // default: the leaves' device
  bool pinned = false;           // page-locked host buffer (CPU target only)
  int threads = 0;               // 0: a sensible count for this machine
  StoragePtr reuse = {};         // packs into this buffer when it is large enough and on the target device
};

}  // namespace tensortree
