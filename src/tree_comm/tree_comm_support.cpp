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
#include "tree_comm/group_buffers.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"

namespace tensortree::detail {

namespace {

SpareBuffer outgoing_of(const Group& group) {
  return [&group](std::size_t nbytes, Device device) { return outgoing_buffer(group, nbytes, device); };
}

}  // namespace

Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const Group& group) {
  return pack_for_wire(tree, device, room, outgoing_of(group));
}

Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const Group& group) {
  return pack_for_wire(tree, op, room, outgoing_of(group));
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
