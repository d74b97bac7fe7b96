// What the library alone may do to a Storage: the one friend of Storage, kept out of the public
// header because swapping the memory under every tensor that views a storage is safe only where
// the library knows no one else holds a view (a receive into its own consolidated buffer).
#pragma once

#include "tensortree/storage.hpp"

namespace tensortree::detail {

struct StorageAccess {
  // Exchanges what two storages hold (memory, size, kind and owner) while each keeps its identity:
  // every tensor viewing `a` then reads what `b` held. Both must be on one device (InvalidArgument).
  // A receive uses it to publish a message that arrived in a spare buffer without copying it.
  static void swap_memory(Storage& a, Storage& b);
};

}  // namespace tensortree::detail
