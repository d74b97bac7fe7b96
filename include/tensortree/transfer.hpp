// How a TensorTree travels between processes: the options of its communication methods
// (tree.hpp declares the methods; src/tree_comm.cpp implements them over dist_ops and Backend).
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

namespace tensortree {

inline constexpr std::uint32_t kWireVersion = 1;
inline constexpr std::size_t kWireHeaderBytes = 64;

enum class TransferMode : unsigned char {
  // The whole tree as one message: consolidated buffer + wire header (checked by the receiver).
  Consolidated,
  // One message per leaf, in layout order, without a header (TensorDict's default; kept for
  // comparison). The receiver's leaves are written as the messages arrive; only each message's
  // length is checked.
  PerLeaf,
};

struct SendOptions {
  int tag = 0;  // 0..dist::kMaxUserTag; NCCL matches messages in posting order and ignores it
  TransferMode mode = TransferMode::Consolidated;
};

struct RecvOptions {
  int tag = 0;
  TransferMode mode = TransferMode::Consolidated;
  int threads = 0;  // for unpacking into a tree that is not consolidated (0: a sensible count)
};

struct InitRemoteOptions {
  int tag = 0;
  // Every rank of the group takes part (the sender is the root of a broadcast) instead of only
  // the sender and one receiver.
  bool use_broadcast = false;
};

}  // namespace tensortree
