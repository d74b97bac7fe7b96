#include "channel/channel_frame.hpp"

#include <cstring>

#include <boost/endian/buffers.hpp>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

constexpr std::uint32_t kFrameMagic = 0x46435454;  // "TTCF" read as a little-endian u32
constexpr std::uint16_t kFrameVersion = 2;

struct FrameRecord {
  boost::endian::little_uint32_buf_t magic;
  boost::endian::little_uint16_buf_t version;
  boost::endian::little_uint16_buf_t kind;
  boost::endian::little_uint64_buf_t sequence;
};
static_assert(sizeof(FrameRecord) == kFrameHeaderBytes);

struct CreditRecord {
  boost::endian::little_uint64_buf_t taken;
  boost::endian::little_uint64_buf_t window_trees;
  boost::endian::little_uint64_buf_t window_bytes;
};
static_assert(sizeof(CreditRecord) == kCreditBytes);

std::size_t header_bytes(FrameKind kind) {
  return kind == FrameKind::Credit ? kFrameHeaderBytes + kCreditBytes : kFrameHeaderBytes;
}

}  // namespace

EncodedFrame encode_frame(const Frame& frame) {
  FrameRecord record{};
  record.magic = kFrameMagic;
  record.version = kFrameVersion;
  record.kind = static_cast<std::uint16_t>(frame.kind);
  record.sequence = frame.sequence;
  EncodedFrame encoded;
  std::memcpy(encoded.bytes.data(), &record, sizeof record);
  encoded.size = header_bytes(frame.kind);
  if (frame.kind == FrameKind::Credit) {
    CreditRecord credit{};
    credit.taken = frame.credit.taken;
    credit.window_trees = frame.credit.window_trees;
    credit.window_bytes = frame.credit.window_bytes;
    std::memcpy(encoded.bytes.data() + sizeof record, &credit, sizeof credit);
  }
  return encoded;
}

Frame decode_frame(std::span<const std::byte> bytes, const std::string& peer) {
  const auto corrupt = [&](const std::string& problem) {
    throw CorruptData(fmt::format("tree channel: the message from {} has {}", peer, problem));
  };
  if (bytes.size() < kFrameHeaderBytes) {
    corrupt(fmt::format("a frame header of {} bytes (at least {})", bytes.size(), kFrameHeaderBytes));
  }
  FrameRecord record;
  std::memcpy(&record, bytes.data(), sizeof record);
  if (record.magic.value() != kFrameMagic) corrupt("no frame header (wrong magic)");
  if (record.version.value() != kFrameVersion) {
    corrupt(fmt::format("frame format version {}; this library reads {}", record.version.value(), kFrameVersion));
  }
  const std::uint16_t kind = record.kind.value();
  if (kind < static_cast<std::uint16_t>(FrameKind::Schema) || kind > static_cast<std::uint16_t>(FrameKind::Close)) {
    corrupt(fmt::format("an unknown frame kind {}", kind));
  }
  Frame frame{static_cast<FrameKind>(kind), record.sequence.value()};
  if (bytes.size() != header_bytes(frame.kind)) {
    corrupt(fmt::format("a frame header of {} bytes (a frame of kind {} has {})", bytes.size(), kind,
                        header_bytes(frame.kind)));
  }
  if (frame.kind == FrameKind::Credit) {
    CreditRecord credit;
    std::memcpy(&credit, bytes.data() + sizeof record, sizeof credit);
    frame.credit = {credit.taken.value(), credit.window_trees.value(), credit.window_bytes.value()};
  }
  return frame;
}

}  // namespace tensortree::detail
