// The 16-byte header of every message on a tree channel (layout in tensortree/tree_channel.hpp):
// what the message is, and its place in the channel's sequence, checked before its bytes arrive.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tensortree::detail {

enum class FrameKind : std::uint16_t { Schema = 1, Data = 2, Keepalive = 3 };

inline constexpr std::size_t kFrameHeaderBytes = 16;

struct Frame {
  FrameKind kind;
  std::uint64_t sequence;  // 0 for the first message of a connection, then one more each
};

std::array<std::byte, kFrameHeaderBytes> encode_frame(const Frame& frame);
// CorruptData naming `peer` when `bytes` are not a frame header of this format.
Frame decode_frame(std::span<const std::byte> bytes, const std::string& peer);

}  // namespace tensortree::detail
