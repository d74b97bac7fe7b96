#include "wire/wire_pack.hpp"

#include <optional>
#include <string_view>
#include <utility>

#include "core/storage_access.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tree/consolidation_access.hpp"
#include "tree/layout_plan.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"

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
  forget_trailing_header(reuse);
  PackedTree packed = pack_walked(walked, {.device = walked.target, .reuse = reuse});
  return {std::move(packed.storage), packed.plan->schema, walked.target};
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
  return {packing_for(tree, device.type(), "recv")->plan->schema, nullptr};
}

Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const SpareBuffer& spare) {
  if (std::optional<Outgoing> own = own_buffer(tree, device, room)) return *own;
  return pack_walked_for_wire(walk_for_packing(tree, {.device = device}, "send"), room, spare);
}

Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const SpareBuffer& spare) {
  if (tree.is_consolidated()) return pack_for_wire(tree, tree.storage()->device(), room, spare);
  // One walk finds the leaves' device and the layout and then packs.
  return pack_walked_for_wire(walk_for_packing(tree, {}, op), room, spare);
}

void take_payload(TensorTree& tree, const Schema& schema, const StoragePtr& arrived, int threads) {
  if (!tree.is_consolidated() || tree.schema()->fingerprint() != schema.fingerprint()) {
    tree.unpack_from(*arrived, schema, threads);
    return;
  }
  Storage& own = *tree.storage();
  // Memory another process maps (share_memory_, a mapped file) must keep its pages: copied into.
  const bool own_movable = own.kind() != MemoryKind::Foreign && own.kind() != MemoryKind::SharedHost;
  const bool arrived_movable = arrived->kind() != MemoryKind::Foreign && own.device() == arrived->device();
  if (own_movable && ConsolidationAccess::buffer_shared(tree)) {
    // A copy of the tree (or a leaf or send holding its buffer) keeps the values it had: the tree
    // takes the arrived memory in a storage of its own (the spare's pool lets go of the emptied
    // spare), or a copy of it where that memory is a view of a larger message.
    StoragePtr fresh;
    if (arrived_movable) {
      fresh = StorageAccess::take_memory(*arrived);
    } else {
      fresh = Storage::allocate(own.nbytes(), own.device(), own.is_pinned());
      copy_bytes(fresh->data(), fresh->device(), arrived->data(), arrived->device(), schema.total_bytes());
    }
    ConsolidationAccess::rebind(tree, std::move(fresh));
  } else if (own_movable && arrived_movable) {
    // Held by the tree alone, the buffers change places: the spare goes back to its pool, so a
    // steady stream of receives allocates nothing.
    StorageAccess::swap_memory(own, *arrived);
  } else {
    copy_bytes(own.data(), own.device(), arrived->data(), arrived->device(), schema.total_bytes());
  }
}

}  // namespace tensortree::detail
