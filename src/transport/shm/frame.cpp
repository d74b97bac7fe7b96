#include "transport/shm/frame.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

constexpr std::uint32_t kFrameMagic = 0x464e5454;  // "TTNF"
constexpr std::uint32_t kReleaseMagic = 0x524e5454;  // "TTNR"
constexpr std::uint8_t kFrameVersion = 1;
// Byte offsets within the header; [32, 48) and [184, 192) are reserved (zero).
constexpr std::size_t kMagicAt = 0, kVersionAt = 4, kKindAt = 5, kLengthAt = 8, kOffsetAt = 16, kTokenAt = 24;
constexpr std::size_t kReservedAt = 32, kHandleAt = 48, kChecksumAt = kHandleAt + kRegionHandleBytes;
static_assert(kChecksumAt + 8 <= kFrameHeaderBytes);

template <class T>
void put(std::byte* at, T value) {
  std::memcpy(at, &value, sizeof value);
}

template <class T>
T get(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

[[noreturn]] void corrupt(int sender, const std::string& problem) {
  throw CorruptData(fmt::format("node-local transport: the frame from rank {} has {}", sender, problem));
}

}  // namespace

void encode_frame(const Frame& frame, std::byte* header) {
  std::fill_n(header, kFrameHeaderBytes, std::byte{0});
  put(header + kMagicAt, kFrameMagic);
  put(header + kVersionAt, kFrameVersion);
  put(header + kKindAt, static_cast<std::uint8_t>(frame.kind));
  put(header + kLengthAt, frame.length);
  put(header + kOffsetAt, frame.offset);
  put(header + kTokenAt, frame.token);
  std::copy(frame.handle.begin(), frame.handle.end(), header + kHandleAt);
  put(header + kChecksumAt, XXH3_64bits(header, kChecksumAt));
}

Frame decode_frame_header(std::span<const std::byte> message, int sender) {
  if (message.size() < kFrameHeaderBytes) corrupt(sender, fmt::format("{} bytes, less than a header", message.size()));
  const std::byte* header = message.data();
  if (get<std::uint32_t>(header + kMagicAt) != kFrameMagic) corrupt(sender, "no frame magic");
  if (get<std::uint8_t>(header + kVersionAt) != kFrameVersion) corrupt(sender, "an unknown frame version");
  if (get<std::uint64_t>(header + kChecksumAt) != XXH3_64bits(header, kChecksumAt)) corrupt(sender, "a bad checksum");
  const auto zero = [](std::byte b) { return b == std::byte{0}; };
  if (!std::all_of(header + kReservedAt, header + kHandleAt, zero) ||
      !std::all_of(header + kChecksumAt + 8, header + kFrameHeaderBytes, zero)) {
    corrupt(sender, "non-zero reserved bytes");
  }
  Frame frame;
  const auto kind = get<std::uint8_t>(header + kKindAt);
  if (kind < static_cast<std::uint8_t>(FrameKind::Inline) || kind > static_cast<std::uint8_t>(FrameKind::Streamed)) {
    corrupt(sender, fmt::format("frame kind {}", kind));
  }
  frame.kind = static_cast<FrameKind>(kind);
  frame.length = get<std::uint64_t>(header + kLengthAt);
  frame.offset = get<std::uint64_t>(header + kOffsetAt);
  frame.token = get<std::uint64_t>(header + kTokenAt);
  std::copy_n(header + kHandleAt, kRegionHandleBytes, frame.handle.begin());
  return frame;
}

Frame decode_frame(std::span<const std::byte> message, int sender) {
  const Frame frame = decode_frame_header(message, sender);
  const std::uint64_t follows = message.size() - kFrameHeaderBytes;
  if (frame.kind == FrameKind::Inline && frame.length != follows) {
    corrupt(sender, fmt::format("an inline length of {} bytes over {}", frame.length, follows));
  }
  if (in_region(frame.kind) && follows != 0) corrupt(sender, "bytes after a region frame");
  return frame;
}

void encode_ack(const Ack& ack, std::byte* out) {
  put(out, ack.token);
  put(out + 8, std::uint64_t{ack.copied ? 1U : 0U});
}

Ack decode_ack(std::span<const std::byte> message, int sender) {
  if (message.size() != kAckBytes) corrupt(sender, fmt::format("an acknowledgement of {} bytes", message.size()));
  const auto status = get<std::uint64_t>(message.data() + 8);
  if (status > 1) corrupt(sender, fmt::format("an acknowledgement status of {}", status));
  return {get<std::uint64_t>(message.data()), status == 1};
}

void encode_release(std::span<const RegionHandle> handles, std::byte* out) {
  std::fill_n(out, kReleaseBytes, std::byte{0});
  put(out, kReleaseMagic);
  put(out + 4, static_cast<std::uint32_t>(handles.size()));
  for (std::size_t i = 0; i < handles.size() && i < kMaxReleaseHandles; ++i) {
    std::copy(handles[i].begin(), handles[i].end(), out + kReleaseHeaderBytes + i * kRegionHandleBytes);
  }
}

std::vector<RegionHandle> decode_release(std::span<const std::byte> message, int sender) {
  if (message.size() != kReleaseBytes) corrupt(sender, fmt::format("a release request of {} bytes", message.size()));
  if (get<std::uint32_t>(message.data()) != kReleaseMagic) corrupt(sender, "a release request without its magic");
  const auto count = get<std::uint32_t>(message.data() + 4);
  if (count > kMaxReleaseHandles) corrupt(sender, fmt::format("a release request of {} regions", count));
  const std::byte* unused = message.data() + kReleaseHeaderBytes + count * kRegionHandleBytes;
  if (std::any_of(message.data() + 8, message.data() + kReleaseHeaderBytes, [](std::byte b) { return b != std::byte{0}; }) ||
      std::any_of(unused, message.data() + message.size(), [](std::byte b) { return b != std::byte{0}; })) {
    corrupt(sender, "a release request with non-zero unused bytes");
  }
  std::vector<RegionHandle> handles(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::copy_n(message.data() + kReleaseHeaderBytes + i * kRegionHandleBytes, kRegionHandleBytes, handles[i].begin());
  }
  return handles;
}

}  // namespace tensortree::detail
