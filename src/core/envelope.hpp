// A checksummed envelope around a payload of untrusted origin: a 24-byte little-endian header
// (magic, format version, payload length, XXH3-64 of the payload) and then the payload, so a reader
// rejects damaged or foreign bytes before parsing any of them. The schema and the object
// collectives both use it, each with its own magic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/endian/buffers.hpp>
#include <xxhash.h>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

// What one kind of envelope carries, and the name its errors use ("object envelope").
struct EnvelopeFormat {
  std::uint32_t magic;
  std::uint32_t version;
  std::string_view name;
};

struct EnvelopeHeader {
  boost::endian::little_uint32_buf_t magic;
  boost::endian::little_uint32_buf_t version;
  boost::endian::little_uint64_buf_t payload_bytes;
  boost::endian::little_uint64_buf_t checksum;
};
static_assert(sizeof(EnvelopeHeader) == 24);

// Writes the header into the first bytes of `envelope` for the payload that follows them, so a
// payload serialized in place behind a header-sized gap is sealed without a copy.
inline void stamp_envelope(const EnvelopeFormat& format, std::span<std::byte> envelope) {
  const std::span<const std::byte> payload = envelope.subspan(sizeof(EnvelopeHeader));
  EnvelopeHeader header;
  header.magic = format.magic;
  header.version = format.version;
  header.payload_bytes = payload.size();
  header.checksum = XXH3_64bits(payload.data(), payload.size());
  std::memcpy(envelope.data(), &header, sizeof header);
}

inline std::vector<std::byte> seal_envelope(const EnvelopeFormat& format, std::span<const std::byte> payload) {
  std::vector<std::byte> envelope(sizeof(EnvelopeHeader) + payload.size());
  if (!payload.empty()) std::memcpy(envelope.data() + sizeof(EnvelopeHeader), payload.data(), payload.size());
  stamp_envelope(format, envelope);
  return envelope;
}

// The payload, once every header field checks out; CorruptData naming the first that does not.
inline std::span<const std::byte> open_envelope(const EnvelopeFormat& format, std::span<const std::byte> envelope) {
  const std::string name(format.name);
  EnvelopeHeader header;
  if (envelope.size() < sizeof header) {
    throw CorruptData(fmt::format("{} of {} bytes is shorter than its {}-byte header", name, envelope.size(),
                                  sizeof header));
  }
  std::memcpy(&header, envelope.data(), sizeof header);
  if (header.magic.value() != format.magic) throw CorruptData(fmt::format("{}: wrong magic number", name));
  if (header.version.value() != format.version) {
    throw CorruptData(fmt::format("{}: format version {}, this build reads version {}", name, header.version.value(),
                                  format.version));
  }
  const std::span<const std::byte> payload = envelope.subspan(sizeof header);
  if (header.payload_bytes.value() != payload.size()) {
    throw CorruptData(fmt::format("{}: header announces a payload of {} bytes, {} payload bytes are present", name,
                                  header.payload_bytes.value(), payload.size()));
  }
  if (XXH3_64bits(payload.data(), payload.size()) != header.checksum.value()) {
    throw CorruptData(fmt::format("{}: checksum mismatch over {} payload bytes", name, payload.size()));
  }
  return payload;
}

}  // namespace tensortree::detail
