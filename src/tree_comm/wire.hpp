// What travels with a tree's bytes: the 64-byte wire header (layout in transfer.hpp), the spare
// buffers that messages arrive in, and the byte-level moves between host and device that both need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tensortree/device.hpp"
#include "tensortree/group.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/transfer.hpp"

namespace tensortree::detail {

struct WireHeader {
  std::uint64_t fingerprint = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t schema_bytes = 0;  // an encoded Schema follows the header (collectives); 0 otherwise

  friend bool operator==(const WireHeader&, const WireHeader&) = default;
};

// "rank 3" or, for a message from kAnySource not yet matched, "an unknown rank".
std::string rank_name(int rank);

// Writes the header at `at`, in host or device memory on `device`.
void write_wire_header(const WireHeader& header, std::byte* at, Device device);
// write_wire_header behind a payload: at byte `offset` of `buffer`, in memory on buffer's device.
// In device memory it is skipped when this process wrote the same header there last and the
// buffer still holds the same memory: a tree sent again and again from its own buffer (one
// consolidated for its group) then costs the sender no copy to the device, which on a GPU that
// several processes share waits for their work (~135 us on an H100 while a peer copies).
void write_trailing_header(const WireHeader& header, const StoragePtr& buffer, std::size_t offset);
// Forgets what write_trailing_header wrote into `buffer`: for a pack into it, which may write
// its bytes over an earlier header.
void forget_trailing_header(const StoragePtr& buffer);
// Reads the header at `at`; CorruptData naming `sender` (a group rank) and `what` ("recv") when
// the magic, version, checksum or reserved bytes are wrong.
WireHeader read_wire_header(const std::byte* at, Device device, int sender, const char* what);

// A buffer of at least `nbytes` on `device` that nobody else holds: reused from `group`'s small
// pool of earlier ones when one is free (a buffer is free again once its last user has let it
// go), so a steady stream of transfers of one size allocates nothing. The pool goes with the group.
StoragePtr spare_buffer(const Group& group, std::size_t nbytes, Device device);
// The same for a message this rank packs and sends, from a pool of its own: memory the group's
// transport sends from without copying (shared memory, where peers share the node).
StoragePtr outgoing_buffer(const Group& group, std::size_t nbytes, Device device);

// Bytes [offset, offset + nbytes) of `storage` as a 1-D uint8 tensor.
Tensor storage_bytes(const StoragePtr& storage, std::size_t offset, std::size_t nbytes);

// Copies between host or device memory on either side (one device kind each).
void copy_bytes(std::byte* dst, Device dst_device, const std::byte* src, Device src_device, std::size_t nbytes);

// A storage viewing bytes [offset, offset + nbytes) of `parent` and keeping it alive: how a tree
// made from one block of a gathered buffer gets a storage of its own that starts at its payload.
StoragePtr sub_storage(const StoragePtr& parent, std::size_t offset, std::size_t nbytes);

}  // namespace tensortree::detail
