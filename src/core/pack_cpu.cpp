#include "core/pack_cpu.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstring>

namespace tensortree::detail {

namespace {

// Below this many bytes per thread, waking another thread costs more than the copy it would do.
constexpr std::uint64_t kMinBytesPerThread = std::uint64_t{1} << 20;
// The buffer is cut into pieces of about this size; threads take pieces as they become free.
constexpr std::uint64_t kPieceBytes = std::uint64_t{256} << 10;
// Piece boundaries fall on multiples of this, so they never split an element (itemsize divides it).
constexpr std::uint64_t kBoundaryAlignment = 64;
// Small leaves live in separate allocations whose order the hardware prefetcher cannot guess: the
// first line of the leaf this many segments ahead is requested while the current one is copied.
constexpr std::ptrdiff_t kPrefetchAhead = 8;

void prefetch_leaf(PackDirection direction, const std::byte* leaf) {
  if (direction == PackDirection::Pack) {
    __builtin_prefetch(leaf, 0);
  } else {
    __builtin_prefetch(leaf, 1);
  }
}

void move_dense(PackDirection direction, std::byte* leaf, std::byte* buffer, std::uint64_t nbytes) {
  if (direction == PackDirection::Pack) {
    std::memcpy(buffer, leaf, nbytes);
  } else {
    std::memcpy(leaf, buffer, nbytes);
  }
}

// Moves elements [first, last) (C order) of a strided leaf to/from the dense run at `buffer`,
// whole inner rows at a time.
void move_strided(PackDirection direction, const StridedView& view, std::uint32_t itemsize,
                  std::int64_t first, std::int64_t last, std::byte* buffer) {
  if (view.ndim == 0) {
    if (first < last) move_dense(direction, view.data, buffer, itemsize);
    return;
  }
  std::int64_t coord[kMaxDims] = {};
  std::int64_t rest = first;
  for (int d = view.ndim - 1; d >= 0; --d) {
    coord[d] = rest % view.shape[d];
    rest /= view.shape[d];
  }
  const int inner = view.ndim - 1;
  const std::int64_t inner_stride = view.strides[inner] * itemsize;
  std::int64_t remaining = last - first;
  while (remaining > 0) {
    std::int64_t offset = 0;
    for (int d = 0; d < view.ndim; ++d) offset += coord[d] * view.strides[d];
    std::byte* leaf = view.data + offset * itemsize;
    const std::int64_t run = std::min(view.shape[inner] - coord[inner], remaining);
    if (inner_stride == itemsize) {
      move_dense(direction, leaf, buffer, static_cast<std::uint64_t>(run) * itemsize);
      buffer += run * itemsize;
    } else {
      for (std::int64_t i = 0; i < run; ++i, buffer += itemsize) {
        move_dense(direction, leaf + i * inner_stride, buffer, itemsize);
      }
    }
    remaining -= run;
    coord[inner] += run;
    for (int d = inner; d > 0 && coord[d] == view.shape[d]; --d) {
      coord[d] = 0;
      ++coord[d - 1];
    }
  }
}

// Everything one thread does: the part of each segment inside [begin, end), and zeroes between.
void move_range(PackDirection direction, std::span<const PackSegment> segments,
                std::span<const StridedView> strided, std::byte* buffer, std::uint64_t begin,
                std::uint64_t end) {
  auto it = std::partition_point(segments.begin(), segments.end(), [begin](const PackSegment& s) {
    return s.buffer_offset + s.nbytes <= begin;
  });
  std::uint64_t cursor = begin;
  for (; it != segments.end() && it->buffer_offset < end; ++it) {
    if (segments.end() - it > kPrefetchAhead) prefetch_leaf(direction, (it + kPrefetchAhead)->leaf_data);
    const std::uint64_t lo = std::max(it->buffer_offset, begin);
    const std::uint64_t hi = std::min(it->buffer_offset + it->nbytes, end);
    if (direction == PackDirection::Pack && cursor < lo) std::memset(buffer + cursor, 0, lo - cursor);
    cursor = std::max(cursor, hi);
    if (lo >= hi) continue;
    const std::uint64_t within = lo - it->buffer_offset;
    if (it->strided_index < 0) {
      move_dense(direction, it->leaf_data + within, buffer + lo, hi - lo);
    } else {
      move_strided(direction, strided[static_cast<std::size_t>(it->strided_index)], it->itemsize,
                   static_cast<std::int64_t>(within / it->itemsize),
                   static_cast<std::int64_t>((hi - it->buffer_offset) / it->itemsize), buffer + lo);
    }
  }
  if (direction == PackDirection::Pack && cursor < end) std::memset(buffer + cursor, 0, end - cursor);
}

}  // namespace

int default_pack_threads(std::uint64_t total_bytes) {
  const auto by_size = static_cast<int>(std::max<std::uint64_t>(1, total_bytes / kMinBytesPerThread));
  return std::clamp(by_size, 1, tbb::info::default_concurrency());
}

// Work stealing rather than a fork-join barrier: the calling thread copies every piece no other
// thread has taken, so a worker that the OS has not scheduled (other ranks on the same cores) never
// holds the copy up.
void pack_cpu(PackDirection direction, std::span<const PackSegment> segments,
              std::span<const StridedView> strided, std::byte* buffer, std::uint64_t total_bytes,
              int threads) {
  if (total_bytes == 0) return;
  const int n = threads > 0 ? threads : default_pack_threads(total_bytes);
  if (n == 1) {
    move_range(direction, segments, strided, buffer, 0, total_bytes);
    return;
  }
  const std::uint64_t pieces_per_thread = std::max<std::uint64_t>(1, total_bytes / kPieceBytes / n);
  const std::uint64_t pieces = pieces_per_thread * static_cast<std::uint64_t>(n);
  const std::uint64_t piece_bytes =
      (total_bytes / pieces + kBoundaryAlignment - 1) / kBoundaryAlignment * kBoundaryAlignment;
  auto move_pieces = [&](const tbb::blocked_range<std::uint64_t>& range) {
    const std::uint64_t begin = std::min(total_bytes, range.begin() * piece_bytes);
    const std::uint64_t end = std::min(total_bytes, range.end() * piece_bytes);
    if (begin < end) move_range(direction, segments, strided, buffer, begin, end);
  };
  tbb::task_arena arena(std::min(n, tbb::info::default_concurrency()));
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, pieces), move_pieces, tbb::simple_partitioner());
  });
}

}  // namespace tensortree::detail
