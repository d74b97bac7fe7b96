// The 64-byte wire header that travels behind a tree's bytes (layout in transfer.hpp): written and
// read in host or device memory, and checked against the layout a receiver expects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensortree/device.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/transfer.hpp"  // kWireHeaderBytes, the byte layout

namespace tensortree::detail {

struct WireHeader {
  std::uint64_t fingerprint = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t schema_bytes = 0;  // an encoded Schema follows the header (collectives); 0 otherwise

  friend bool operator==(const WireHeader&, const WireHeader&) = default;
};

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
// Reads the header at `at`; CorruptData naming `sender` ("rank 3", "10.0.0.2:4000") and `what`
// ("recv") when the magic, version, checksum or reserved bytes are wrong.
WireHeader read_wire_header(const std::byte* at, Device device, std::string_view sender, std::string_view what);

// The arrived-tree check every receiver makes: the header announces a tree of exactly `schema`'s
// layout (its fingerprint and length, no schema behind it).
bool announces(const WireHeader& header, const Schema& schema);

}  // namespace tensortree::detail
