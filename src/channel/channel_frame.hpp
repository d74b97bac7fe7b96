// The header of every message on a tree channel (layout in tensortree/tree_channel.hpp): what the
// message is, and its place in the channel's sequence, checked before its bytes arrive. A credit
// frame's header also carries the credit (what its sender's caller has taken, and the window).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tensortree::detail {

// Schema, Data and Keepalive as the format's first version; Credit and Close since version 2.
enum class FrameKind : std::uint16_t { Schema = 1, Data = 2, Keepalive = 3, Credit = 4, Close = 5 };

inline constexpr std::size_t kFrameHeaderBytes = 16;
inline constexpr std::size_t kCreditBytes = 24;
inline constexpr std::size_t kMaxFrameHeaderBytes = kFrameHeaderBytes + kCreditBytes;

// What a receiver lets its peer send: trees (and their message bytes) sent and not yet taken by
// the receiver's caller, and how many trees that caller has taken since the channel began.
struct Credit {
  std::uint64_t taken = 0;
  std::uint64_t window_trees = 0;
  std::uint64_t window_bytes = 0;
};

struct Frame {
  FrameKind kind;
  std::uint64_t sequence;  // 0 for the first message of a connection, then one more each
  Credit credit{};         // a Credit frame's
};

// A frame header as it goes on the wire: 16 bytes, 40 for a credit frame.
struct EncodedFrame {
  std::array<std::byte, kMaxFrameHeaderBytes> bytes{};
  std::size_t size = 0;
  std::span<const std::byte> span() const { return {bytes.data(), size}; }
};

EncodedFrame encode_frame(const Frame& frame);
// CorruptData naming `peer` when `bytes` are not a frame header of this format.
Frame decode_frame(std::span<const std::byte> bytes, const std::string& peer);

}  // namespace tensortree::detail
