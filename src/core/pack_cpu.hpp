// Moves every segment between the leaves and one buffer on the CPU. The buffer's byte range is
// split evenly across threads (never a thread or task per leaf), so a tree of many small leaves
// and a tree of a few large ones both use every thread; bytes between segments are zeroed.
#pragma once

#include <cstdint>
#include <span>

#include "core/pack_plan.hpp"

namespace tensortree::detail {

// `segments` must be sorted by buffer_offset and lie inside [0, total_bytes).
// threads <= 0 picks a count from the machine and the number of bytes.
void pack_cpu(PackDirection direction, std::span<const PackSegment> segments,
              std::span<const StridedView> strided, std::byte* buffer, std::uint64_t total_bytes,
              int threads);

// The thread count pack_cpu uses for `total_bytes` when asked to choose.
int default_pack_threads(std::uint64_t total_bytes);

}  // namespace tensortree::detail
