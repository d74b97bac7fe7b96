#include "transport/shm/streamed_copy.hpp"

#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

StreamedCopy::StreamedCopy(ShareableMemory& memory, std::shared_ptr<ImportedRegion> region, const Frame& frame,
                           Tensor destination, std::optional<WaitClock::time_point> deadline)
    : memory_(memory),
      region_(std::move(region)),
      offset_(frame.offset),
      length_(frame.length),
      destination_(std::move(destination)),
      deadline_(deadline) {
  if (!memory.streams() || frame.offset < kProgressBytes) {
    throw CorruptData(fmt::format("a streamed payload at offset {}{}", frame.offset,
                                  memory.streams() ? ", over its region's progress count"
                                                   : " in memory that is not streamed"));
  }
}

bool StreamedCopy::advance(int sender) {
  const std::uint64_t written = memory_.streamed_bytes(*region_);
  if (written < copied_ || written > length_) {
    throw CorruptData(fmt::format("a progress count of {} bytes after {}, of a payload of {}", written, copied_,
                                  length_));
  }
  if (written > copied_) {
    memory_.copy_out_part(*region_, offset_, destination_, copied_, written);
    copied_ = written;
  }
  if (copied_ == length_) return true;
  if (deadline_ && WaitClock::now() >= *deadline_) {
    throw Timeout(fmt::format("recv from rank {}: its streamed payload stopped at {} of {} bytes and did not go on "
                              "within the group's timeout (GroupOptions::timeout)", sender, copied_, length_));
  }
  return false;
}

}  // namespace tensortree::detail
