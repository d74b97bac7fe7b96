// A tree to and from the bytes of one message, for any engine that moves whole trees: the tree's
// device and layout, packing it into a buffer with room for the wire header behind its payload,
// and moving an arrived payload into a tree.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

#include "tensortree/device.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tree.hpp"

namespace tensortree::detail {

// The one device of the tree's leaves (the CPU for a tree without leaves); NotSupported naming
// `op` when the leaves are spread over several.
Device device_of(const TensorTree& tree, std::string_view op);

// A tree's layout, and its consolidated buffer when it has one (else null).
struct TreeLayout {
  std::shared_ptr<const Schema> schema;
  StoragePtr storage;
};
TreeLayout layout_of(const TensorTree& tree, Device device);

// A buffer holding the tree's payload from byte 0 with at least `room` bytes behind it: the tree's
// own consolidated buffer when it has the room and the library allocated it, else a spare buffer
// the tree is packed into.
struct Outgoing {
  StoragePtr buffer;
  std::shared_ptr<const Schema> schema;
  Device device;  // the buffer's
};
// `spare(nbytes, device)` gives the buffer a tree without its own fitting buffer is packed into.
using SpareBuffer = std::function<StoragePtr(std::size_t nbytes, Device device)>;
Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const SpareBuffer& spare);
// The same on the leaves' device, found by the walk that packs them (one walk per send);
// NotSupported naming `op` when the leaves are on more than one device.
Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const SpareBuffer& spare);

// Moves a checked payload (bytes [0, schema.total_bytes()) of `arrived`) into `tree`, whose layout
// is `schema`: when both buffers are the library's, without a copy, by exchanging them where the
// tree alone holds its buffer and by making `arrived` the tree's buffer where a copy of the tree
// (or anything else) holds it too, which then keeps its values; by one copy into a consolidated
// buffer the library does not own (a mapped file stays the tree's buffer); or by unpacking into
// the leaves of a tree that is not consolidated.
void take_payload(TensorTree& tree, const Schema& schema, const StoragePtr& arrived, int threads);

}  // namespace tensortree::detail
