// What the point-to-point and the collective methods of TensorTree share beyond the wire layer
// (wire/): packing into a group's buffers, and the per-group record of which layouts every member
// already knows.
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
#include "wire/wire_pack.hpp"

namespace tensortree::detail {

// pack_for_wire into the group's outgoing buffers (group_buffers.hpp): memory its transport sends
// from without a copy.
Outgoing pack_for_wire(const TensorTree& tree, Device device, std::size_t room, const Group& group);
Outgoing pack_for_wire(const TensorTree& tree, std::string_view op, std::size_t room, const Group& group);

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
