// How one tree, at one structure version, moves between its leaves and a buffer of its layout. A
// sender packs the same tree again and again (a buffer tree refilled in place each step): the
// packing is kept, keyed on the tree's structure version, so a repeated pack is a copy per leaf and
// nothing else, with no walk over the tree, no structure hash and no plan lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/pack_plan.hpp"
#include "tensortree/device.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tree.hpp"
#include "tree/layout_plan.hpp"

namespace tensortree::detail {

// Where one leaf's bytes begin. Not a pointer: a Storage can trade its memory for another's (a
// receive into a consolidated tree swaps buffers), so every pack reads the address afresh.
struct LeafSource {
  const Storage* storage = nullptr;
  std::uint64_t byte_offset = 0;
};

// The segments with the leaves' current addresses.
struct ResolvedSegments {
  std::vector<PackSegment> segments;
  std::vector<StridedView> strided;
};

struct TreePacking {
  std::uint64_t structure_version = 0;
  Device source = Device::cpu();  // the leaves' device (the CPU for a tree without leaves)
  std::shared_ptr<const LayoutPlan> plan;
  // One per leaf with bytes, in layout order; leaf_data (and the strided views' data) stay null
  // here and are filled from `sources` by resolve().
  std::vector<PackSegment> segments;
  std::vector<LeafSource> sources;
  std::vector<StridedView> strided;
  // resolve()'s last result, and the count of memory trades it was read at.
  mutable ResolvedSegments resolved;
  mutable std::uint64_t resolved_at_trades = ~std::uint64_t{0};

  // True when a leaf with bytes views `storage`: packing into it in place could then overwrite
  // bytes before they are read.
  bool reads_from(const Storage* storage) const;
};

// The packing of `tree` into a buffer on a `storage_device` device (nullopt: where the leaves are):
// the cached one while the tree's structure version is unchanged, else a walk (and the layout
// cache) makes a new one. NotSupported naming `op` when the leaves are on more than one device.
std::shared_ptr<const TreePacking> packing_for(const TensorTree& tree, std::optional<DeviceType> storage_device,
                                               std::string_view op);

// The segments with the leaves' current addresses. Kept in the packing and read again only when
// some Storage has traded its memory since (StorageAccess::memory_trades), so a sender that packs
// one tree again and again reads no Storage at all. A packing belongs to the thread that made it.
const ResolvedSegments& resolve(const TreePacking& packing);

}  // namespace tensortree::detail
