// How a TensorTree travels between processes: the wire format of its communication methods
// (tree.hpp declares the methods, comm_options.hpp their options; src/tree_comm implements them).
//
// Wire format of a consolidated transfer: one message of schema.total_bytes() payload bytes (the
// consolidated buffer, exactly as laid out by the Schema) followed by a 64-byte wire header:
//   [0, 4)   magic "TTWH"          [4, 8)   format version (kWireVersion)
//   [8, 16)  schema fingerprint    [16, 24) payload bytes
//   [24, 32) schema bytes (0 here; the gathers' blocks put an encoded Schema behind the header)
//   [32, 40) XXH3-64 of bytes [0, 32)       [40, 64) zero
// (integers little-endian). The header rides behind the payload so that both ends can use a
// consolidated buffer as it is: the payload starts at the buffer's first byte, where the schema's
// offsets count from, and consolidate() leaves 64 spare bytes behind every buffer for the header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensortree/comm_options.hpp"

namespace tensortree {

inline constexpr std::uint32_t kWireVersion = 1;
inline constexpr std::size_t kWireHeaderBytes = 64;

}  // namespace tensortree
