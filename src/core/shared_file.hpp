// Host memory of another process on this node: a memfd of that process (Storage::allocate_shared),
// named by /proc/<pid>/fd/<fd> and checked by its inode. Opening it needs the permission a debugger
// would (same user, ptrace allowed); the probe tells whether two processes have it, before they
// rely on it.
#pragma once

#include <cstdint>

#include "tensortree/storage.hpp"

namespace tensortree::detail {

struct SharedFileAddress {
  std::int32_t pid = 0;
  std::int32_t fd = -1;
  std::uint64_t inode = 0;  // tells a reused descriptor number from the file meant

  bool operator==(const SharedFileAddress&) const = default;
};

// The address of `storage`'s memfd, as peers on this node open it; InvalidArgument unless
// `storage` is SharedHost memory.
SharedFileAddress address_of(const Storage& storage);

// Maps bytes [0, nbytes) of the memfd at `address` read-only. CorruptData when the file there is not
// the one described (another inode), is not sealed against shrinking (a peer could cut it under the
// mapping), or is shorter than `nbytes`; BackendError when it cannot be opened or mapped. The
// mapping stays valid after the peer closes the file or exits.
StoragePtr map_peer_file(const SharedFileAddress& address, std::uint64_t nbytes);

// This process's probe: a one-page memfd kept for the life of the process, whose address peers try
// to map to learn whether they can map this process's memory.
SharedFileAddress probe_address();

// Whether the probe at `address` maps (never throws).
bool can_map(const SharedFileAddress& address) noexcept;

}  // namespace tensortree::detail
