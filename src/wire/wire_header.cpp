#include "wire/wire_header.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include <boost/endian/buffers.hpp>
#include <xxhash.h>

#include "core/storage_access.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/transfer.hpp"
#include "wire/byte_moves.hpp"

namespace tensortree::detail {

namespace {

constexpr std::uint32_t kWireMagic = 0x48575454;  // "TTWH" read as a little-endian u32

struct WireRecord {
  boost::endian::little_uint32_buf_t magic;
  boost::endian::little_uint32_buf_t version;
  boost::endian::little_uint64_buf_t fingerprint;
  boost::endian::little_uint64_buf_t payload_bytes;
  boost::endian::little_uint64_buf_t schema_bytes;
  boost::endian::little_uint64_buf_t checksum;  // XXH3-64 of the 32 bytes above
  std::array<std::byte, 24> reserved;           // zero
};
static_assert(sizeof(WireRecord) == kWireHeaderBytes);

constexpr std::size_t kChecked = 32;

using Bytes = std::array<std::byte, kWireHeaderBytes>;

// The headers write_trailing_header left in device buffers, the most recent few. A record holds
// while its buffer lives, still holds the memory it held (no take_memory, no swap_memory in this
// process since: a receive may have traded it) and nothing packed into it since
// (forget_trailing_header). Writes by hand through a view of a buffer never reach the bytes behind
// its payload.
class TrailingHeaders {
 public:
  bool written(const StoragePtr& buffer, std::size_t offset, const WireHeader& header) {
    const std::lock_guard lock(mutex_);
    return std::any_of(records_.begin(), records_.end(), [&](const Record& record) {
      return record.holds(buffer, offset, header);
    });
  }
  void record(const StoragePtr& buffer, std::size_t offset, const WireHeader& header) {
    const std::lock_guard lock(mutex_);
    forget_locked(buffer.get());
    records_[next_++ % records_.size()] = {buffer, buffer->data(), offset, header, StorageAccess::memory_trades()};
  }
  void forget(const Storage* buffer) {
    const std::lock_guard lock(mutex_);
    forget_locked(buffer);
  }

 private:
  struct Record {
    std::weak_ptr<Storage> buffer;
    const std::byte* data = nullptr;
    std::size_t offset = 0;
    WireHeader header;
    std::uint64_t trades = 0;

    bool holds(const StoragePtr& other, std::size_t at, const WireHeader& wanted) const {
      return buffer.lock() == other && other->data() == data && at == offset && wanted == header &&
             trades == StorageAccess::memory_trades();
    }
  };
  void forget_locked(const Storage* buffer) {
    for (Record& record : records_) {
      if (record.buffer.lock().get() == buffer) record = {};
    }
  }

  std::mutex mutex_;
  std::array<Record, 16> records_;
  std::size_t next_ = 0;
};

TrailingHeaders& trailing_headers() {
  static TrailingHeaders headers;
  return headers;
}

}  // namespace

void write_trailing_header(const WireHeader& header, const StoragePtr& buffer, std::size_t offset) {
  if (buffer->device().is_cpu()) {
    write_wire_header(header, buffer->data() + offset, buffer->device());
    return;
  }
  if (trailing_headers().written(buffer, offset, header)) return;
  write_wire_header(header, buffer->data() + offset, buffer->device());
  trailing_headers().record(buffer, offset, header);
}

// Host buffers have no records (write_trailing_header always writes there): a CPU send's pack
// takes no lock.
void forget_trailing_header(const StoragePtr& buffer) {
  if (!buffer->device().is_cpu()) trailing_headers().forget(buffer.get());
}

void write_wire_header(const WireHeader& header, std::byte* at, Device device) {
  WireRecord record{};
  record.magic = kWireMagic;
  record.version = kWireVersion;
  record.fingerprint = header.fingerprint;
  record.payload_bytes = header.payload_bytes;
  record.schema_bytes = header.schema_bytes;
  record.checksum = XXH3_64bits(&record, kChecked);
  copy_bytes(at, device, reinterpret_cast<const std::byte*>(&record), Device::cpu(), sizeof record);
}

WireHeader read_wire_header(const std::byte* at, Device device, std::string_view sender, std::string_view what) {
  WireRecord record;
  copy_bytes(reinterpret_cast<std::byte*>(&record), Device::cpu(), at, device, sizeof record);
  const auto corrupt = [&](const std::string& problem) {
    throw CorruptData(fmt::format("{}: the message from {} has {}", what, sender, problem));
  };
  if (record.magic.value() != kWireMagic) corrupt("no wire header (wrong magic)");
  if (record.version.value() != kWireVersion) {
    corrupt(fmt::format("wire format version {}; this library reads {}", record.version.value(), kWireVersion));
  }
  if (record.checksum.value() != XXH3_64bits(&record, kChecked)) corrupt("a wire header that fails its checksum");
  if (std::any_of(record.reserved.begin(), record.reserved.end(), [](std::byte b) { return b != std::byte{0}; })) {
    corrupt("non-zero reserved bytes in its wire header");
  }
  return {record.fingerprint.value(), record.payload_bytes.value(), record.schema_bytes.value()};
}

bool announces(const WireHeader& header, const Schema& schema) {
  return header.fingerprint == schema.fingerprint() && header.payload_bytes == schema.total_bytes() &&
         header.schema_bytes == 0;
}

}  // namespace tensortree::detail
