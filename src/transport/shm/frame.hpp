// The node-local transport's messages on the existing backend: a frame per transfer (the payload
// inline when small, else where it lies in the sender's shared memory), and the acknowledgement
// that tells the sender its region may be written again. Frames are peer bytes: decode_frame checks
// every field before anything is done with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/shm/shareable_memory.hpp"

namespace tensortree::detail {

// Streamed: a Region frame sent before the payload is all in the region; the sender writes it in
// chunks and counts the bytes written in the region's progress word, so that the receiver copies
// each chunk out while the next one goes in (a large payload is then read while it is still in
// the caches, as MPI's pipelined fragments are, instead of written whole and then read whole).
enum class FrameKind : std::uint8_t { Inline = 1, Region = 2, Streamed = 3 };

// Whether a frame names memory in the sender's region (and so waits for an acknowledgement).
inline bool in_region(FrameKind kind) { return kind != FrameKind::Inline; }

struct Frame {
  FrameKind kind = FrameKind::Inline;
  std::uint64_t length = 0;  // payload bytes
  std::uint64_t offset = 0;  // Region, Streamed: where the payload starts in the region
  std::uint64_t token = 0;   // Region, Streamed: echoed in the acknowledgement
  RegionHandle handle{};     // Region, Streamed: how to open the region
};

// Fixed part of every frame; an Inline frame's payload follows it.
inline constexpr std::size_t kFrameHeaderBytes = 192;

// Acknowledgements travel on this tag of the same communicator: above every tag dist_ops uses, and
// within the 32767 that MPI guarantees.
inline constexpr int kAckTag = 32767;
inline constexpr std::size_t kAckBytes = 16;

void encode_frame(const Frame& frame, std::byte* header);
// CorruptData naming `sender` (a group rank) when the magic, version, checksum, kind or reserved
// bytes are wrong, or an Inline frame's length is not the bytes that follow its header.
Frame decode_frame(std::span<const std::byte> message, int sender);
// The same checks of the header alone, for a message whose length is not known (a receive that
// failed): an Inline frame's length is not compared with what follows.
Frame decode_frame_header(std::span<const std::byte> message, int sender);

// An acknowledgement with this token (transfer tokens start at 1) is a receiver's last message on
// kAckTag to a sender whose region frames it acknowledged: it has closed and reads none of the
// sender's regions again. MPI keeps one sender's messages on a tag in order, so every acknowledgement it
// sent arrived before this one; a transfer still unacknowledged then was never taken.
inline constexpr std::uint64_t kClosingToken = 0;

struct Ack {
  std::uint64_t token = 0;
  bool copied = false;  // false: the receiver refused the frame (the sender's send fails)
};
void encode_ack(const Ack& ack, std::byte* out);
Ack decode_ack(std::span<const std::byte> message, int sender);

// Release requests travel from a sender to a receiver on this tag: "close your mappings of these
// regions of mine" (RegionRetirement). The receiver answers on kAckTag with kReleasedToken once it
// has; a sender has at most one request to a peer unanswered. A request naming no region is the
// sender's last message on the tag (its group has gone), so that the receive each peer keeps
// posted for requests completes.
inline constexpr int kReleaseTag = 32766;
inline constexpr std::uint64_t kReleasedToken = ~std::uint64_t{0};
inline constexpr std::size_t kMaxReleaseHandles = 16;
inline constexpr std::size_t kReleaseHeaderBytes = 16;
inline constexpr std::size_t kReleaseBytes = kReleaseHeaderBytes + kMaxReleaseHandles * kRegionHandleBytes;

// At most kMaxReleaseHandles handles (none: the closing) into a message of kReleaseBytes.
void encode_release(std::span<const RegionHandle> handles, std::byte* out);
// CorruptData naming `sender` when the magic, count or unused bytes are wrong; empty for the closing.
std::vector<RegionHandle> decode_release(std::span<const std::byte> message, int sender);

}  // namespace tensortree::detail
