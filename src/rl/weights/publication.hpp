// A weight publication as a process holds it: the validated copy of its fixed header, its layout,
// the mapped control block and one storage per slot. Publisher and subscribers attach the same way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rl/weights/control_block.hpp"
#include "rl/weights/lease_table.hpp"
#include "rl/weights/publication_file.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/storage.hpp"

namespace tensortree::rl {

struct Publication {
  std::string path;
  OpenFile file;
  FixedHeader fixed{};
  std::shared_ptr<const Schema> schema;
  std::shared_ptr<Mapping> control;  // [0, data_offset), read-write
  ControlHeader* header = nullptr;   // inside `control`
  std::vector<StoragePtr> slots;

  LeaseTable leases() const {
    return {reinterpret_cast<PaddedWord*>(control->data() + fixed.lease_offset), fixed.max_leases};
  }
  std::atomic<std::uint64_t>& state(std::uint32_t slot) const { return header->slot_state[slot].value; }
  std::atomic<std::uint64_t>& claim(std::uint32_t slot) const { return header->slot_claim[slot].value; }
  // The newest version and its slot, bounded: CorruptData when the word names no slot or nothing was
  // published (a file only gets its name after its first version).
  Latest latest() const;
};

// Validates the file at `path` (header copied out first, then the schema) and maps it. A publisher
// maps its slots writable; CUDA slots are mapped through IPC for a subscriber and refused for a
// publisher (NotSupported: the device memory died with the publisher that allocated it).
Publication attach_publication(std::string path, OpenFile file, bool as_publisher);

// Maps the control block and host slots of a file whose header and schema are known to be right.
void map_publication(Publication& publication, bool as_publisher);

}  // namespace tensortree::rl
