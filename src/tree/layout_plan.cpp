#include "tree/layout_plan.hpp"

#include "tree/consolidation_access.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>

namespace tensortree::detail {

namespace {

constexpr std::uint8_t kNodeMarker = 0xff;  // never a DType value
constexpr std::size_t kCachedPlans = 64;
// Each leaf's Storage is a separate allocation, read for the leaf's data pointer and device. The
// walk reads them after the tree, over the flat list of leaves, asking for the one this many leaves
// ahead, so that the reads overlap instead of stalling one by one (and across sub-trees too).
constexpr std::size_t kPrefetchAhead = 12;

template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_shape(std::string& out, const Shape& shape) {
  put(out, static_cast<std::uint8_t>(shape.size()));
  out.append(reinterpret_cast<const char*>(shape.data()), shape.size() * sizeof(std::int64_t));
}

class LayoutCache {
 public:
  std::shared_ptr<const LayoutPlan> find(const std::string& structure, std::uint64_t hash, DeviceType device) {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < plans_.size(); ++i) {
      const LayoutPlan& plan = *plans_[i];
      if (plan.structure_hash == hash && plan.storage_device == device && plan.structure == structure) {
        std::rotate(plans_.begin(), plans_.begin() + static_cast<std::ptrdiff_t>(i),
                    plans_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return plans_.front();
      }
    }
    return nullptr;
  }

  void insert(std::shared_ptr<const LayoutPlan> plan) {
    const std::lock_guard lock(mutex_);
    plans_.insert(plans_.begin(), std::move(plan));
    if (plans_.size() > kCachedPlans) plans_.pop_back();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<const LayoutPlan>> plans_;  // most recently used first
};

LayoutCache& layout_cache() {
  static LayoutCache cache;
  return cache;
}

std::shared_ptr<const LayoutPlan> make_plan(const TensorTree& tree, const TreeWalk& walk,
                                            std::uint64_t hash, DeviceType storage_device) {
  std::vector<NodeSpec> nodes;
  tree.for_each_node([&](const Path& path, const TensorTree& node) {
    nodes.push_back({path, node.batch_size(), ConsolidationAccess::direct_keys(node)});
  });
  std::vector<LeafPlan> leaves;
  leaves.reserve(walk.leaves.size());
  tree.for_each_leaf([&](const Path& path, const Tensor& leaf) {
    leaves.push_back({path, leaf.dtype(), leaf.shape()});
  });
  std::vector<Path> paths;
  paths.reserve(leaves.size());
  for (const LeafPlan& leaf : leaves) paths.push_back(leaf.path);

  auto plan = std::make_shared<LayoutPlan>();
  plan->structure = walk.structure;
  plan->structure_hash = hash;
  plan->storage_device = storage_device;
  plan->schema = std::make_shared<const Schema>(Schema::plan(std::move(nodes), std::move(leaves), storage_device));
  plan->offsets.reserve(paths.size());
  for (const Path& path : paths) plan->offsets.push_back(plan->schema->find_leaf(path)->offset);
  plan->layout_order.resize(paths.size());
  std::iota(plan->layout_order.begin(), plan->layout_order.end(), 0u);
  std::sort(plan->layout_order.begin(), plan->layout_order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return plan->offsets[a] < plan->offsets[b]; });
  return plan;
}

}  // namespace

void ConsolidationAccess::describe(const TensorTree& node, TreeWalk& walk) {
  put_shape(walk.structure, node.batch_size_);
  put(walk.structure, static_cast<std::uint64_t>(node.entries_.size()));
  const std::size_t count = node.entries_.size();
  for (std::size_t i = 0; i < count; ++i) {
    const TensorTree::Entry& entry = node.entries_[i];
    put(walk.structure, static_cast<std::uint32_t>(entry.key.size()));
    walk.structure += entry.key;
    if (entry.node) {
      put(walk.structure, kNodeMarker);
      describe(*entry.node, walk);
    } else {
      put(walk.structure, static_cast<std::uint8_t>(entry.leaf.dtype()));
      put_shape(walk.structure, entry.leaf.shape());
      const Tensor& leaf = entry.leaf;  // data and device: read_storages()
      walk.leaves.push_back({&leaf, leaf.storage().get(), nullptr, leaf.nbytes(),
                             static_cast<std::uint32_t>(leaf.itemsize()), Device::cpu(), leaf.is_contiguous()});
    }
  }
}

std::vector<std::string> ConsolidationAccess::direct_keys(const TensorTree& node) {
  std::vector<std::string> keys;
  keys.reserve(node.entries_.size());
  for (const TensorTree::Entry& entry : node.entries_) keys.push_back(entry.key);
  return keys;
}

namespace {

void read_storages(std::vector<WalkedLeaf>& leaves) {
  const std::size_t count = leaves.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (i + kPrefetchAhead < count) __builtin_prefetch(leaves[i + kPrefetchAhead].storage);
    WalkedLeaf& leaf = leaves[i];
    leaf.data = static_cast<std::byte*>(leaf.tensor->data_ptr());
    leaf.device = leaf.tensor->device();
  }
}

}  // namespace

const TreeWalk& walk_tree(const TensorTree& tree) {
  thread_local TreeWalk walk;
  walk.structure.clear();
  walk.leaves.clear();
  ConsolidationAccess::describe(tree, walk);
  read_storages(walk.leaves);
  return walk;
}

std::shared_ptr<const LayoutPlan> layout_plan_for(const TensorTree& tree, const TreeWalk& walk,
                                                  DeviceType storage_device) {
  const std::uint64_t hash = XXH3_64bits(walk.structure.data(), walk.structure.size());
  if (auto plan = layout_cache().find(walk.structure, hash, storage_device)) return plan;
  auto plan = make_plan(tree, walk, hash, storage_device);
  layout_cache().insert(plan);
  return plan;
}

}  // namespace tensortree::detail
