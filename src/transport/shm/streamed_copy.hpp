// StreamedCopy: the receiver's copy of a Streamed frame's payload, taken in steps: each step copies
// out what the sender has written since the last one and returns, so that a sender that stalls or
// dies mid-copy holds up only this receive, never the rank's other polls. The whole copy, however
// many steps, is bounded by one deadline (a peer that advances its count a byte at a time gets no
// more).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/wait_bounded.hpp"
#include "transport/shm/frame.hpp"
#include "transport/shm/shareable_memory.hpp"

namespace tensortree::detail {

class StreamedCopy {
 public:
  // CorruptData when `frame` cannot be a stream in `memory` (its offset would overlap the region's
  // progress count, or the memory does not stream).
  StreamedCopy(ShareableMemory& memory, std::shared_ptr<ImportedRegion> region, const Frame& frame, Tensor destination,
               std::optional<WaitClock::time_point> deadline);

  // Copies out what has been written since the last step. True once the whole payload is in
  // `destination`; CorruptData for a count that goes back or past the payload; Timeout (naming
  // `sender`) once the deadline has passed with bytes still missing.
  bool advance(int sender);

 private:
  ShareableMemory& memory_;
  std::shared_ptr<ImportedRegion> region_;
  std::uint64_t offset_;
  std::uint64_t length_;
  Tensor destination_;
  std::optional<WaitClock::time_point> deadline_;
  std::uint64_t copied_ = 0;
};

}  // namespace tensortree::detail
