// The control block at the start of a weight publication file, and the rules that make the bytes of
// a file someone else wrote trustworthy before they are used.
//
//   [0, kHeaderRegion)                 ControlHeader (fixed fields, then the atomic words)
//   [lease_offset, + max_leases * 64)  lease words, one cache line each (readers in different
//                                      processes take and drop them without sharing a line)
//   [schema_offset, + schema_bytes)    the layout, Schema::encode()
//   [data_offset, + slots * stride)    the slots (host publications; CUDA ones hold the slots in a
//                                      device allocation named by ipc_handle)
//
// Words that change while the publication lives:
//   latest          version << 8 | slot of the newest complete version (0: none yet)
//   slot state      2 * version once the slot holds `version` whole; odd while it is written; 0 empty
//   slot claim      non-zero while the publisher checks the leases of a slot it means to write
//   lease word      start << 30 | pid << 8 | (slot + 1) while a reader of process `pid`, started at
//                   `start` (clock ticks since boot, low 34 bits), holds `slot`; 0 when free. The
//                   start time tells a live reader from a new process that was given a dead one's pid.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "rl/process_identity.hpp"
#include "tensortree/schema.hpp"

namespace tensortree::rl {

inline constexpr std::uint64_t kWeightsMagic = 0x544847494557'5454ULL;  // "TTWEIGHT" little-endian
inline constexpr std::uint32_t kWeightsFormatVersion = 1;
inline constexpr std::uint32_t kMinSlots = 3;
inline constexpr std::uint32_t kMaxSlots = 16;
inline constexpr std::uint32_t kMaxLeases = 1u << 16;
inline constexpr std::uint64_t kHeaderRegion = 4096;
inline constexpr std::uint64_t kLeaseStride = 64;
inline constexpr std::uint64_t kPageBytes = 4096;
// Versions fit above the 8 bits of slot index in the latest word.
inline constexpr std::uint64_t kMaxVersion = (std::uint64_t{1} << 55) - 1;
// A schema larger than this is not a parameter tree anyone publishes: refuse it before reading.
inline constexpr std::uint64_t kMaxSchemaBytes = std::uint64_t{1} << 30;

enum class SlotMemory : std::uint32_t { Host = 0, Cuda = 1 };

struct alignas(64) PaddedWord {
  std::atomic<std::uint64_t> value;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "control words are shared between processes");
static_assert(sizeof(PaddedWord) == kLeaseStride);

// What the creator writes once, before the file gets its name; readers copy it out and validate
// the copy, so a process that scribbles over it later cannot change what was checked.
struct FixedHeader {
  std::uint64_t magic;
  std::uint32_t format_version;
  std::uint32_t header_bytes;  // sizeof(ControlHeader) of the writer
  std::uint32_t slot_count;
  std::uint32_t max_leases;
  std::uint32_t memory;  // SlotMemory
  std::int32_t cuda_device;
  std::uint64_t slot_stride;
  std::uint64_t payload_bytes;  // the schema's total_bytes
  std::uint64_t lease_offset;
  std::uint64_t schema_offset;
  std::uint64_t schema_bytes;
  std::uint64_t data_offset;
  std::uint64_t file_bytes;
  std::uint64_t fingerprint;
  std::uint64_t ipc_bytes;  // the device allocation's size (CUDA)
  std::array<std::byte, 64> ipc_handle;
};

struct ControlHeader {
  FixedHeader fixed;
  PaddedWord latest;
  PaddedWord slot_state[kMaxSlots];
  PaddedWord slot_claim[kMaxSlots];
};
static_assert(sizeof(ControlHeader) <= kHeaderRegion);

struct Latest {
  std::uint64_t version;
  std::uint32_t slot;
};
inline std::uint64_t encode_latest(std::uint64_t version, std::uint32_t slot) { return version << 8 | slot; }
inline Latest decode_latest(std::uint64_t word) {
  return {word >> 8, static_cast<std::uint32_t>(word & 0xff)};
}
inline std::uint64_t complete_state(std::uint64_t version) { return version * 2; }
inline std::uint64_t writing_state(std::uint64_t version) { return version * 2 + 1; }

// Who holds a lease: a process and when it started (rl/process_identity.hpp).
inline std::uint64_t encode_lease(const ProcessIdentity& holder, std::uint32_t slot) {
  return (holder.start & kStartMask) << 30 | (holder.pid & kPidMask) << 8 | (slot + 1);
}
inline ProcessIdentity lease_holder(std::uint64_t word) { return {static_cast<std::uint32_t>((word >> 8) & kPidMask), word >> 30}; }
// The slot a lease word pins; meaningless for a free word (0).
inline std::uint32_t lease_slot(std::uint64_t word) { return static_cast<std::uint32_t>(word & 0xff) - 1; }

// Sizes of a new publication, from which every offset follows (plan_layout).
struct LayoutRequest {
  std::uint32_t slots;
  std::uint32_t max_leases;
  SlotMemory memory;
  std::int32_t cuda_device;
  std::uint64_t payload_bytes;
  std::uint64_t schema_bytes;
  std::uint64_t fingerprint;
};
// The fixed header of a new publication; InvalidArgument when the sizes overflow or break a bound.
FixedHeader plan_layout(const LayoutRequest& request);

// Checks a header copied from `path` (a file of `file_bytes` bytes): magic, format version, every
// bound and offset, with overflow-checked arithmetic. CorruptData naming the field and the path.
void validate_header(const FixedHeader& header, std::uint64_t file_bytes, const std::string& path);

// The layout in `bytes` (copied from schema_offset of a validated header): CorruptData when they do
// not decode, or describe another size, fingerprint or memory than the header's.
std::shared_ptr<const Schema> read_schema(const FixedHeader& header, std::span<const std::byte> bytes,
                                          const std::string& path);

}  // namespace tensortree::rl
