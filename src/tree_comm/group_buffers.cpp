#include "tree_comm/group_buffers.hpp"

#include "comm/group_state.hpp"
#include "core/buffer_pool.hpp"
#include "core/text_format.hpp"

namespace tensortree::detail {

namespace {

// Attachments of a group: the pool that messages arrive in, and the pool of outgoing buffers (in
// the memory the group's transport sends from fastest).
struct ForArrivals : BufferPool {};
struct ForSending : BufferPool {};

}  // namespace

std::string rank_name(int rank) { return rank >= 0 ? fmt::format("rank {}", rank) : "an unknown rank"; }

StoragePtr spare_buffer(const Group& group, std::size_t nbytes, Device device) {
  return GroupAccess::require(group).attachment<ForArrivals>().take(
      nbytes, device, [&] { return Storage::allocate(nbytes, device); });
}

// In the memory of the transport that takes receives from any member: the shared-memory one where
// the group has one, which then sends the tree to its peers without a copy; the others send from
// any memory.
StoragePtr outgoing_buffer(const Group& group, std::size_t nbytes, Device device) {
  GroupState& state = GroupAccess::require(group);
  return state.attachment<ForSending>().take(
      nbytes, device, [&] { return state.any_source(device).allocate_message_buffer(nbytes, device); });
}

}  // namespace tensortree::detail
