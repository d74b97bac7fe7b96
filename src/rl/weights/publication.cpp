#include "rl/weights/publication.hpp"

#include <cstring>

#include "core/text_format.hpp"
#include "rl/weights/slot_memory.hpp"
#include "tensortree/error.hpp"

namespace tensortree::rl {

Latest Publication::latest() const {
  const Latest newest = decode_latest(header->latest.value.load(std::memory_order_acquire));
  if (newest.version == 0 || newest.slot >= fixed.slot_count) {
    throw CorruptData(fmt::format("weight publication {}: its newest version is {} in slot {} of {}", path,
                                  newest.version, newest.slot, fixed.slot_count));
  }
  return newest;
}

void map_publication(Publication& publication, bool as_publisher) {
  const FixedHeader& fixed = publication.fixed;
  publication.control = Mapping::map(publication.file.fd.get(), 0, fixed.data_offset, true, publication.path);
  publication.header = reinterpret_cast<ControlHeader*>(publication.control->data());
  if (fixed.memory == static_cast<std::uint32_t>(SlotMemory::Host)) {
    const std::uint64_t data_bytes = fixed.file_bytes - fixed.data_offset;
    std::shared_ptr<Mapping> data =
        Mapping::map(publication.file.fd.get(), fixed.data_offset, data_bytes, as_publisher, publication.path);
    publication.slots = host_slots(data, data->data(), fixed);
  } else if (!as_publisher) {
    publication.slots = map_device_slots(fixed, publication.path);
  }
}

Publication attach_publication(std::string path, OpenFile file, bool as_publisher) {
  Publication publication;
  publication.path = std::move(path);
  publication.file = std::move(file);
  const std::vector<std::byte> head =
      read_bytes(publication.file.fd.get(), 0, std::min<std::uint64_t>(publication.file.bytes, sizeof(FixedHeader)),
                 publication.path);
  if (head.size() < sizeof(FixedHeader)) validate_header({}, head.size(), publication.path);
  std::memcpy(&publication.fixed, head.data(), sizeof(FixedHeader));
  validate_header(publication.fixed, publication.file.bytes, publication.path);
  if (as_publisher && publication.fixed.memory == static_cast<std::uint32_t>(SlotMemory::Cuda)) {
    throw NotSupported(fmt::format("weight publication {} holds CUDA slots of a publisher that is gone: its device "
                                   "memory went with it; publish with replace = true",
                                   publication.path));
  }
  const std::vector<std::byte> schema_bytes = read_bytes(publication.file.fd.get(), publication.fixed.schema_offset,
                                                         publication.fixed.schema_bytes, publication.path);
  publication.schema = read_schema(publication.fixed, schema_bytes, publication.path);
  map_publication(publication, as_publisher);
  return publication;
}

}  // namespace tensortree::rl
