#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "comm/group_state.hpp"
#include "core/storage_access.hpp"
#include "core/text_format.hpp"
#include "tree/consolidation_access.hpp"
#include "tree/layout_difference.hpp"
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
  forget_trailing_header(reuse);
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
  return {packing_for(tree, device.type(), "recv")->plan->schema, nullptr};
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

void LayoutRegistry::remember(std::shared_ptr<const Schema> schema, int announced_by) {
  std::lock_guard lock(mutex_);
  Known& known = known_[schema->fingerprint()];
  if (!known.schema) known.schema = std::move(schema);
  if (announced_by >= 0) known.announced_by = announced_by;
}

std::shared_ptr<const Schema> LayoutRegistry::find(std::uint64_t fingerprint) const {
  std::lock_guard lock(mutex_);
  const auto it = known_.find(fingerprint);
  return it == known_.end() ? nullptr : it->second.schema;
}

int LayoutRegistry::announcer(std::uint64_t fingerprint) const {
  std::lock_guard lock(mutex_);
  const auto it = known_.find(fingerprint);
  return it == known_.end() ? -1 : it->second.announced_by;
}

// ---- layout mismatches ----------------------------------------------------------------------------

namespace {

// Where a receiver has only the sender's fingerprint or length: how to learn the key.
constexpr std::string_view kNamingTheKey =
    "set TENSORTREE_DISTRIBUTED_DEBUG=DETAIL (or GroupOptions::debug_checks) on every rank, and recv names the "
    "first key that differs";

}  // namespace

std::string layout_mismatch(const Group& group, std::string_view op, int sender, int tag, const Schema& mine,
                            std::optional<std::uint64_t> theirs) {
  const auto registry = LayoutRegistry::of(group);
  std::string text = fmt::format("{} from {} (tag {}): ", op, rank_name(sender), tag);
  if (theirs) {
    text += fmt::format("the sender's tree (layout {:#018x}) differs from this tree (layout {:#018x})", *theirs,
                        mine.fingerprint());
    const std::shared_ptr<const Schema> sent = registry->find(*theirs);
    const std::string difference = sent ? difference_text(mine, *sent, "there") : std::string();
    text += difference.empty() ? "; this rank has not seen the sender's layout, so it cannot name the key that "
                                 "differs (" + std::string(kNamingTheKey) + ")"
                               : " " + difference;
  } else {
    text += fmt::format("the sender's tree is not of this tree's length ({} bytes, layout {:#018x}), so it is of "
                        "another layout ({})", mine.total_bytes(), mine.fingerprint(), kNamingTheKey);
  }
  // MPI's receives take a message whole (a longer one truncated), so a refused one is gone: saying
  // so keeps a caller from waiting for it again.
  text += fmt::format("; this tree is unchanged, and the message is dropped: the next recv from {} (tag {}) takes "
                      "the message sent after it. ",
                      rank_name(sender), tag);
  const int announcer = registry->announcer(mine.fingerprint());
  if (announcer >= 0 && (announcer == sender || sender < 0)) {
    return text + fmt::format("This tree's layout came from {}'s init_remote: a sender that changed its tree's batch "
                              "size, keys, dtypes or shapes since must call init_remote again (and this rank "
                              "from_remote_init)", rank_name(announcer));
  }
  return text + "A plain send goes to a tree of the sender's layout; for a receiver that knows nothing of it, pair "
                "init_remote on the sender with from_remote_init here";
}

}  // namespace tensortree::detail
