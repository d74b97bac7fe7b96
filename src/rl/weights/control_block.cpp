#include "rl/weights/control_block.hpp"

#include <optional>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::rl {

namespace {

using detail::checked_add;
using detail::checked_align_up;
using detail::checked_mul;

// Offsets of the regions that follow the header, or nullopt when a size overflows.
struct Offsets {
  std::uint64_t schema_offset;
  std::uint64_t data_offset;
  std::uint64_t file_bytes;
};

std::optional<Offsets> offsets_for(std::uint32_t max_leases, std::uint64_t schema_bytes, std::uint32_t slots,
                                   std::uint64_t slot_stride, SlotMemory memory) {
  const auto leases = checked_mul<std::uint64_t>(max_leases, kLeaseStride);
  if (!leases) return std::nullopt;
  const auto schema_offset = checked_add(kHeaderRegion, *leases);
  if (!schema_offset) return std::nullopt;
  const auto schema_end = checked_add(*schema_offset, schema_bytes);
  if (!schema_end) return std::nullopt;
  const auto data_offset = checked_align_up(*schema_end, kPageBytes);
  if (!data_offset) return std::nullopt;
  // CUDA slots live in the device allocation: the file ends where its slots would begin.
  const auto data_bytes = memory == SlotMemory::Host ? checked_mul<std::uint64_t>(slots, slot_stride) : 0;
  if (!data_bytes) return std::nullopt;
  const auto file_bytes = checked_add(*data_offset, *data_bytes);
  if (!file_bytes) return std::nullopt;
  return Offsets{*schema_offset, *data_offset, *file_bytes};
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw CorruptData(fmt::format("weight publication {}: {}", path, what));
}

void check_counts(const FixedHeader& h, const std::string& path) {
  if (h.header_bytes != sizeof(ControlHeader)) {
    corrupt(path, fmt::format("header_bytes is {}, expected {}", h.header_bytes, sizeof(ControlHeader)));
  }
  if (h.slot_count < kMinSlots || h.slot_count > kMaxSlots) {
    corrupt(path, fmt::format("slot_count is {}, outside [{}, {}]", h.slot_count, kMinSlots, kMaxSlots));
  }
  if (h.max_leases == 0 || h.max_leases > kMaxLeases) {
    corrupt(path, fmt::format("max_leases is {}, outside [1, {}]", h.max_leases, kMaxLeases));
  }
  if (h.memory != static_cast<std::uint32_t>(SlotMemory::Host) && h.memory != static_cast<std::uint32_t>(SlotMemory::Cuda)) {
    corrupt(path, fmt::format("memory kind is {}, neither host (0) nor CUDA (1)", h.memory));
  }
  if (h.schema_bytes > kMaxSchemaBytes) {
    corrupt(path, fmt::format("schema_bytes is {}, above the bound {}", h.schema_bytes, kMaxSchemaBytes));
  }
}

void check_stride(const FixedHeader& h, const std::string& path) {
  const auto stride = checked_align_up(h.payload_bytes, kPageBytes);
  if (!stride || *stride != h.slot_stride) {
    corrupt(path, fmt::format("slot_stride is {}, not payload_bytes {} rounded up to a page", h.slot_stride,
                              h.payload_bytes));
  }
  if (h.memory == static_cast<std::uint32_t>(SlotMemory::Cuda)) {
    const auto device_bytes = checked_mul<std::uint64_t>(h.slot_count, h.slot_stride);
    if (!device_bytes || *device_bytes > h.ipc_bytes) {
      corrupt(path, fmt::format("the device allocation holds {} bytes, fewer than {} slots of {}", h.ipc_bytes,
                                h.slot_count, h.slot_stride));
    }
  }
}

void check_offsets(const FixedHeader& h, std::uint64_t file_bytes, const std::string& path) {
  const auto expected = offsets_for(h.max_leases, h.schema_bytes, h.slot_count, h.slot_stride,
                                    static_cast<SlotMemory>(h.memory));
  if (!expected) corrupt(path, "its sizes overflow 64 bits");
  if (h.lease_offset != kHeaderRegion || h.schema_offset != expected->schema_offset ||
      h.data_offset != expected->data_offset || h.file_bytes != expected->file_bytes) {
    corrupt(path, fmt::format("offsets (leases {}, schema {}, data {}, end {}) differ from those its sizes give "
                              "(leases {}, schema {}, data {}, end {})",
                              h.lease_offset, h.schema_offset, h.data_offset, h.file_bytes, kHeaderRegion,
                              expected->schema_offset, expected->data_offset, expected->file_bytes));
  }
  if (file_bytes != h.file_bytes) {
    corrupt(path, fmt::format("the file holds {} bytes, its header says {} (truncated?)", file_bytes, h.file_bytes));
  }
}

}  // namespace

FixedHeader plan_layout(const LayoutRequest& request) {
  FixedHeader h{};
  h.magic = kWeightsMagic;
  h.format_version = kWeightsFormatVersion;
  h.header_bytes = sizeof(ControlHeader);
  h.slot_count = request.slots;
  h.max_leases = request.max_leases;
  h.memory = static_cast<std::uint32_t>(request.memory);
  h.cuda_device = request.cuda_device;
  h.payload_bytes = request.payload_bytes;
  h.schema_bytes = request.schema_bytes;
  h.fingerprint = request.fingerprint;
  const auto stride = checked_align_up(request.payload_bytes, kPageBytes);
  const auto offsets = stride ? offsets_for(request.max_leases, request.schema_bytes, request.slots, *stride,
                                            request.memory)
                              : std::nullopt;
  if (!offsets) {
    throw InvalidArgument(fmt::format("weight publication: {} slots of {} bytes overflow 64 bits", request.slots,
                                      request.payload_bytes));
  }
  h.slot_stride = *stride;
  h.lease_offset = kHeaderRegion;
  h.schema_offset = offsets->schema_offset;
  h.data_offset = offsets->data_offset;
  h.file_bytes = offsets->file_bytes;
  return h;
}

void validate_header(const FixedHeader& header, std::uint64_t file_bytes, const std::string& path) {
  if (file_bytes < kHeaderRegion) {
    corrupt(path, fmt::format("the file holds {} bytes, fewer than its {}-byte control block (truncated)",
                              file_bytes, kHeaderRegion));
  }
  if (header.magic != kWeightsMagic) corrupt(path, fmt::format("bad magic {:#018x}", header.magic));
  if (header.format_version != kWeightsFormatVersion) {
    corrupt(path, fmt::format("written by format version {}; this build reads version {}", header.format_version,
                              kWeightsFormatVersion));
  }
  check_counts(header, path);
  check_stride(header, path);
  check_offsets(header, file_bytes, path);
}

std::shared_ptr<const Schema> read_schema(const FixedHeader& header, std::span<const std::byte> bytes,
                                          const std::string& path) {
  std::shared_ptr<const Schema> schema;
  try {
    schema = std::make_shared<const Schema>(Schema::decode(bytes));
  } catch (const CorruptData& e) {
    corrupt(path, fmt::format("its layout does not decode: {}", e.what()));
  }
  if (schema->total_bytes() != header.payload_bytes || schema->fingerprint() != header.fingerprint) {
    corrupt(path, fmt::format("its schema describes {} bytes with fingerprint {:#018x}, the header {} bytes with "
                              "{:#018x}",
                              schema->total_bytes(), schema->fingerprint(), header.payload_bytes, header.fingerprint));
  }
  const DeviceType expected = header.memory == static_cast<std::uint32_t>(SlotMemory::Cuda) ? DeviceType::CUDA
                                                                                          : DeviceType::CPU;
  if (schema->storage_device() != expected) corrupt(path, "its schema names another kind of memory than its header");
  return schema;
}

}  // namespace tensortree::rl
