// What the library alone may do to a Storage: the one friend of Storage, kept out of the public
// header because swapping the memory under every tensor that views a storage is safe only where
// the library knows no one else holds a view (a receive into its own consolidated buffer).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "tensortree/storage.hpp"

namespace tensortree::detail {

struct StorageAccess {
  // Exchanges what two storages hold (memory, size, kind and owner) while each keeps its identity:
  // every tensor viewing `a` then reads what `b` held. Both must be on one device (InvalidArgument).
  // A receive uses it to publish a message that arrived in a spare buffer without copying it.
  static void swap_memory(Storage& a, Storage& b);
  // A new storage holding what `from` held (memory, size, kind and owner), leaving `from` empty (no
  // memory, 0 bytes): how a receive gives a tree the buffer a message arrived in when the spare's
  // pool keeps holding the spare itself.
  static std::shared_ptr<Storage> take_memory(Storage& from);
  // How many times swap_memory has run in this process: while it has not changed, every Storage
  // still holds the memory it held, so addresses read from storages earlier are still theirs.
  static std::uint64_t memory_trades() noexcept;
  // When the last user of `storage` lets go, its memory is handed to `keep` (as a storage that
  // owns it) instead of being freed: memory other processes may still map is freed only once they
  // have let go too. `keep` runs in ~Storage and must not throw.
  static void hand_over_on_release(Storage& storage, std::function<void(std::shared_ptr<Storage>)> keep);
};

}  // namespace tensortree::detail
