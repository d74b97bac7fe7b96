// What the point-to-point and the collective methods of TensorTree share: a tree's device and
// layout, packing it for the wire, moving an arrived payload into a tree, and the per-group record
// of which layouts every member already knows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tensortree/device.hpp"
#include "tensortree/group.hpp"
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
Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const Group& group);
// The same on the leaves' device, found by the walk that packs them (one walk per send);
// NotSupported naming `op` when the leaves are on more than one device.
Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const Group& group);
// Both for a sender outside a group (a tree channel): `spare(nbytes, device)` gives the buffer a
// tree without its own fitting buffer is packed into.
using SpareBuffer = std::function<StoragePtr(std::size_t nbytes, Device device)>;
Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const SpareBuffer& spare);
Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const SpareBuffer& spare);

// Moves a checked payload (bytes [0, schema.total_bytes()) of `arrived`) into `tree`, whose layout
// is `schema`: when both buffers are the library's, without a copy, by exchanging them where the
// tree alone holds its buffer and by making `arrived` the tree's buffer where a copy of the tree
// (or anything else) holds it too, which then keeps its values; by one copy into a consolidated
// buffer the library does not own (a mapped file stays the tree's buffer); or by unpacking into
// the leaves of a tree that is not consolidated.
void take_payload(TensorTree& tree, const Schema& schema, const StoragePtr& arrived, int threads);

// Per group: the layouts a root has already broadcast (every member then holds their schema) and
// the schemas this rank has received, by fingerprint, with the rank whose init_remote sent each.
class LayoutRegistry {
 public:
  static std::shared_ptr<LayoutRegistry> of(const Group& group);

  bool published(std::uint64_t fingerprint) const;
  void mark_published(std::uint64_t fingerprint);
  // `announced_by`: the rank whose init_remote sent the schema (from_remote_init), else -1.
  void remember(std::shared_ptr<const Schema> schema, int announced_by = -1);
  // Null when this rank has not seen that layout on this group.
  std::shared_ptr<const Schema> find(std::uint64_t fingerprint) const;
  // The rank whose init_remote last gave this rank that layout, or -1.
  int announcer(std::uint64_t fingerprint) const;

 private:
  struct Known {
    std::shared_ptr<const Schema> schema;
    int announced_by = -1;
  };
  mutable std::mutex mutex_;
  std::unordered_set<std::uint64_t> published_;
  std::unordered_map<std::uint64_t, Known> known_;
};

// Why a tree from `sender` does not fit `mine`, this rank's tree's layout, for a SchemaMismatch
// that begins "<op> from rank 0 (tag 3): ": the sender's layout (`theirs`, the fingerprint its
// header names, none where its message was not of this layout's length) against this one, the
// first key that differs where this rank knows the sender's layout, and what to do about it.
std::string layout_mismatch(const Group& group, std::string_view op, int sender, int tag, const Schema& mine,
                            std::optional<std::uint64_t> theirs);

}  // namespace tensortree::detail
