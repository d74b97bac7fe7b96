// The buffers a group's tree messages arrive in and leave from, pooled per group, and how a
// group's members are named in errors.
#pragma once

#include <cstddef>
#include <string>

#include "tensortree/device.hpp"
#include "tensortree/group.hpp"
#include "tensortree/storage.hpp"

namespace tensortree::detail {

// "rank 3" or, for a message from kAnySource not yet matched, "an unknown rank".
std::string rank_name(int rank);

// A buffer of at least `nbytes` on `device` that nobody else holds: reused from `group`'s small
// pool of earlier ones when one is free (a buffer is free again once its last user has let it
// go), so a steady stream of transfers of one size allocates nothing. The pool goes with the group.
StoragePtr spare_buffer(const Group& group, std::size_t nbytes, Device device);
// The same for a message this rank packs and sends, from a pool of its own: memory the group's
// transport sends from without copying (shared memory, where peers share the node).
StoragePtr outgoing_buffer(const Group& group, std::size_t nbytes, Device device);

}  // namespace tensortree::detail
