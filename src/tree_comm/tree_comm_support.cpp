#include <map>
#include <optional>
#include <string>
#include <utility>

#include "comm/group_state.hpp"
#include "core/storage_access.hpp"
#include "core/text_format.hpp"
#include "tree/consolidation_access.hpp"
#include "tree/layout_plan.hpp"
#include "tree_comm/tree_comm_internal.hpp"
#include "tree_comm/wire.hpp"

namespace tensortree::detail {

Device device_of(const TensorTree& tree, std::string_view op) {
  // A consolidated tree's leaves all view its buffer: no walk over them per transfer.
  if (tree.is_consolidated()) return tree.storage()->device();
  if (const std::optional<Device> device = tree.device()) return *device;
  bool has_leaves = false;
  tree.for_each_leaf([&](const Path&, const Tensor&) { has_leaves = true; });
  if (has_leaves) {
    throw NotSupported(
        fmt::format("{}: the tree's leaves are on more than one device; move them to one with to()", op));
  }
  return Device::cpu();
}

namespace {

Outgoing pack_walked_for_wire(const WalkedTree& walked, std::size_t room, const SpareBuffer& spare) {
  const StoragePtr reuse = spare(walked.plan->schema->total_bytes() + room, walked.target);
  PackedTree packed = pack_walked(walked, {.device = walked.target, .reuse = reuse});
  return {std::move(packed.storage), packed.plan->schema, walked.target};
}

SpareBuffer outgoing_of(const Group& group) {
  return [&group](std::size_t nbytes, Device device) { return outgoing_buffer(group, nbytes, device); };
}

// The tree's own consolidated buffer when it lies on `device` with `room` bytes behind its payload.
std::optional<Outgoing> own_buffer(const TensorTree& tree, Device device, std::size_t room) {
  if (!tree.is_consolidated()) return std::nullopt;
  const StoragePtr& own = tree.storage();
  if (own->kind() == MemoryKind::Foreign || own->device() != device ||
      own->nbytes() < tree.schema()->total_bytes() + room) {
    return std::nullopt;
  }
  return Outgoing{own, tree.schema(), device};
}

}  // namespace

TreeLayout layout_of(const TensorTree& tree, Device device) {
  if (tree.is_consolidated()) return {tree.schema(), tree.storage()};
  return {layout_plan_for(tree, walk_tree(tree), device.type())->schema, nullptr};
}

Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const SpareBuffer& spare) {
  if (std::optional<Outgoing> own = own_buffer(tree, device, room)) return *own;
  return pack_walked_for_wire(walk_for_packing(tree, {.device = device}, "send"), room, spare);
}

Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const Group& group) {
  return pack_for_wire(tree, device, room, outgoing_of(group));
}

Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const SpareBuffer& spare) {
  if (tree.is_consolidated()) return pack_for_wire(tree, tree.storage()->device(), room, spare);
  // One walk finds the leaves' device and the layout and then packs.
  return pack_walked_for_wire(walk_for_packing(tree, {}, op), room, spare);
}

Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const Group& group) {
  return pack_for_wire(tree, op, room, outgoing_of(group));
}

void take_payload(const TensorTree& tree, const Schema& schema, const StoragePtr& arrived, int threads) {
  if (tree.is_consolidated() && tree.schema()->fingerprint() == schema.fingerprint()) {
    Storage& own = *tree.storage();
    // Memory another process maps (share_memory_, a mapped file) must keep its pages: copied into.
    const bool own_movable = own.kind() != MemoryKind::Foreign && own.kind() != MemoryKind::SharedHost;
    if (own_movable && arrived->kind() != MemoryKind::Foreign && own.device() == arrived->device()) {
      StorageAccess::swap_memory(own, *arrived);
    } else {
      copy_bytes(own.data(), own.device(), arrived->data(), arrived->device(), schema.total_bytes());
    }
    return;
  }
  tree.unpack_from(*arrived, schema, threads);
}

// ---- LayoutRegistry ------------------------------------------------------------------------------

// An attachment of the group: it lives exactly as long as the group's state, which the pointer
// returned keeps alive.
std::shared_ptr<LayoutRegistry> LayoutRegistry::of(const Group& group) {
  GroupState& state = GroupAccess::require(group);
  return {GroupAccess::state(group), &state.attachment<LayoutRegistry>()};
}

bool LayoutRegistry::published(std::uint64_t fingerprint) const {
  std::lock_guard lock(mutex_);
  return published_.contains(fingerprint);
}

void LayoutRegistry::mark_published(std::uint64_t fingerprint) {
  std::lock_guard lock(mutex_);
  published_.insert(fingerprint);
}

void LayoutRegistry::remember(std::shared_ptr<const Schema> schema) {
  std::lock_guard lock(mutex_);
  known_.emplace(schema->fingerprint(), std::move(schema));
}

std::shared_ptr<const Schema> LayoutRegistry::find(std::uint64_t fingerprint) const {
  std::lock_guard lock(mutex_);
  const auto it = known_.find(fingerprint);
  return it == known_.end() ? nullptr : it->second;
}

}  // namespace tensortree::detail
