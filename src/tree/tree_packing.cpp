#include "tree/tree_packing.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "core/recently_used.hpp"
#include "core/storage_access.hpp"
#include "core/strided_copy.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// Few: a thread packs one or two trees in turn (a sender's batch, its weights); more would only
// hold plans of trees long gone.
constexpr std::size_t kCachedPackings = 4;
// Each leaf's Storage is its own allocation: asking for the one this many leaves ahead overlaps the
// reads instead of stalling on each.
constexpr std::size_t kPrefetchAhead = 12;

Device leaves_device(const TreeWalk& walk, std::string_view op) {
  if (walk.leaves.empty()) return Device::cpu();
  const Device device = walk.leaves.front().device;
  for (const WalkedLeaf& leaf : walk.leaves) {
    if (leaf.device != device) {
      throw NotSupported(fmt::format("{}: the tree's leaves are on more than one device ({} and {}); move them to one "
                                     "with to()", op, device, leaf.device));
    }
  }
  return device;
}

std::shared_ptr<const TreePacking> make_packing(const TensorTree& tree, std::optional<DeviceType> storage_device,
                                                std::string_view op) {
  const TreeWalk& walk = walk_tree(tree);
  auto packing = std::make_shared<TreePacking>();
  packing->structure_version = tree.structure_version();
  packing->source = leaves_device(walk, op);
  packing->plan = layout_plan_for(tree, walk, storage_device.value_or(packing->source.type()));
  const LayoutPlan& plan = *packing->plan;
  packing->segments.reserve(walk.leaves.size());
  packing->sources.reserve(walk.leaves.size());
  for (const std::uint32_t i : plan.layout_order) {
    const WalkedLeaf& leaf = walk.leaves[i];
    if (leaf.nbytes == 0) continue;
    PackSegment segment{nullptr, plan.offsets[i], leaf.nbytes, -1, leaf.itemsize};
    if (!leaf.contiguous) {
      segment.strided_index = static_cast<std::int32_t>(packing->strided.size());
      StridedView view = strided_view_of(*leaf.tensor);
      view.data = nullptr;
      packing->strided.push_back(view);
    }
    packing->segments.push_back(segment);
    packing->sources.push_back({leaf.storage, leaf.tensor->byte_offset()});
  }
  return packing;
}


}  // namespace

bool TreePacking::reads_from(const Storage* storage) const {
  return std::any_of(sources.begin(), sources.end(),
                     [storage](const LeafSource& leaf) { return leaf.storage == storage; });
}

std::shared_ptr<const TreePacking> packing_for(const TensorTree& tree, std::optional<DeviceType> storage_device,
                                               std::string_view op) {
  thread_local RecentlyUsed<TreePacking, kCachedPackings> cache;
  const std::uint64_t version = tree.structure_version();
  if (auto cached = cache.find([&](const TreePacking& packing) {
        return packing.structure_version == version &&
               packing.plan->storage_device == storage_device.value_or(packing.source.type());
      })) {
    return cached;
  }
  std::shared_ptr<const TreePacking> packing = make_packing(tree, storage_device, op);
  cache.add(packing);
  return packing;
}

const ResolvedSegments& resolve(const TreePacking& packing) {
  const std::uint64_t trades = StorageAccess::memory_trades();
  ResolvedSegments& out = packing.resolved;
  if (packing.resolved_at_trades == trades) return out;
  out.strided = packing.strided;
  out.segments.resize(packing.segments.size());
  const std::size_t count = packing.segments.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (i + kPrefetchAhead < count) __builtin_prefetch(packing.sources[i + kPrefetchAhead].storage);
    const LeafSource& source = packing.sources[i];
    PackSegment segment = packing.segments[i];
    segment.leaf_data = source.storage->data() + source.byte_offset;
    if (segment.strided_index >= 0) out.strided[static_cast<std::size_t>(segment.strided_index)].data = segment.leaf_data;
    out.segments[i] = segment;
  }
  packing.resolved_at_trades = trades;
  return out;
}

}  // namespace tensortree::detail
