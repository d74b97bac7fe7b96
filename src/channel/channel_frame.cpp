#include "channel/channel_frame.hpp"

#include <cstring>

#include <boost/endian/buffers.hpp>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

constexpr std::uint32_t kFrameMagic = 0x46435454;  // "TTCF" read as a little-endian u32
constexpr std::uint16_t kFrameVersion = 1;

struct FrameRecord {
  boost::endian::little_uint32_buf_t magic;
  boost::endian::little_uint16_buf_t version;
  boost::endian::little_uint16_buf_t kind;
  boost::endian::little_uint64_buf_t sequence;
};
static_assert(sizeof(FrameRecord) == kFrameHeaderBytes);

}  // namespace

std::array<std::byte, kFrameHeaderBytes> encode_frame(const Frame& frame) {
  FrameRecord record{};
  record.magic = kFrameMagic;
  record.version = kFrameVersion;
  record.kind = static_cast<std::uint16_t>(frame.kind);
  record.sequence = frame.sequence;
  std::array<std::byte, kFrameHeaderBytes> bytes;
  std::memcpy(bytes.data(), &record, sizeof record);
  return bytes;
}

Frame decode_frame(std::span<const std::byte> bytes, const std::string& peer) {
  const auto corrupt = [&](const std::string& problem) {
    throw CorruptData(fmt::format("tree channel: the message from {} has {}", peer, problem));
  };
  if (bytes.size() != kFrameHeaderBytes) {
    corrupt(fmt::format("a frame header of {} bytes (expected {})", bytes.size(), kFrameHeaderBytes));
  }
  FrameRecord record;
  std::memcpy(&record, bytes.data(), sizeof record);
  if (record.magic.value() != kFrameMagic) corrupt("no frame header (wrong magic)");
  if (record.version.value() != kFrameVersion) {
    corrupt(fmt::format("frame format version {}; this library reads {}", record.version.value(), kFrameVersion));
  }
  const std::uint16_t kind = record.kind.value();
  if (kind < static_cast<std::uint16_t>(FrameKind::Schema) || kind > static_cast<std::uint16_t>(FrameKind::Keepalive)) {
    corrupt(fmt::format("an unknown frame kind {}", kind));
  }
  return {static_cast<FrameKind>(kind), record.sequence.value()};
}

}  // namespace tensortree::detail
