// How the GPU pack kernel divides its work: the spans it moves (each segment and, when packing, each
// gap before, between and after them, to be zeroed), each cut into chunks of at most kPackChunkBytes,
// one thread block per chunk. A block finds its chunk by a binary search over the spans, so the
// descriptors grow with the number of leaves, not of bytes: a few large leaves fit in the kernel's
// parameters, with no upload at all. Host and device code share these definitions (TT_HOST_DEVICE),
// so that the mapping of blocks to bytes is tested on the CPU.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/pack_plan.hpp"

#if defined(__CUDACC__)
#define TT_HOST_DEVICE __host__ __device__
#else
#define TT_HOST_DEVICE
#endif

namespace tensortree::detail {

// Measured on an H100 (8 x 8 MiB): 16 KiB chunks, a block each, copy at the speed of a
// device-to-device cudaMemcpy.
inline constexpr std::uint32_t kPackChunkBytes = 16 * 1024;

struct PackSpan {
  std::uint64_t buffer_offset = 0;
  std::uint64_t nbytes = 0;
  std::uint64_t first_chunk = 0;  // chunks of the spans before this one
  std::int32_t segment = -1;      // -1: a gap to zero
};

// The bytes one block moves.
struct PackChunk {
  std::uint64_t buffer_offset = 0;
  std::uint32_t nbytes = 0;
  std::int32_t segment = -1;  // -1: a gap to zero
};

TT_HOST_DEVICE inline std::uint64_t chunks_in(std::uint64_t nbytes) {
  return nbytes / kPackChunkBytes + (nbytes % kPackChunkBytes != 0);
}

// Chunk `chunk` (< the spans' total chunk count) of `spans` (count >= 1): in the last span whose
// first_chunk is at most `chunk` (an empty span shares its successor's first_chunk and is skipped).
TT_HOST_DEVICE inline PackChunk locate_chunk(const PackSpan* spans, std::uint32_t count, std::uint64_t chunk) {
  std::uint32_t lo = 0;
  std::uint32_t hi = count;  // invariant: spans[lo].first_chunk <= chunk, and hi is past the answer
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (spans[mid].first_chunk <= chunk) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const PackSpan& span = spans[lo];
  const std::uint64_t done = (chunk - span.first_chunk) * kPackChunkBytes;
  const std::uint64_t left = span.nbytes - done;
  return {span.buffer_offset + done, static_cast<std::uint32_t>(left < kPackChunkBytes ? left : kPackChunkBytes),
          span.segment};
}

// The spans of `segments` (sorted by buffer_offset, inside [0, total_bytes)), appended to `out`;
// returns the total chunk count.
inline std::uint64_t append_pack_spans(PackDirection direction, std::span<const PackSegment> segments,
                                       std::uint64_t total_bytes, std::vector<PackSpan>& out) {
  std::uint64_t chunks = 0;
  const auto add = [&](std::uint64_t offset, std::uint64_t nbytes, std::int32_t segment) {
    out.push_back({offset, nbytes, chunks, segment});
    chunks += chunks_in(nbytes);
  };
  std::uint64_t cursor = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const PackSegment& s = segments[i];
    if (direction == PackDirection::Pack && s.buffer_offset > cursor) add(cursor, s.buffer_offset - cursor, -1);
    add(s.buffer_offset, s.nbytes, static_cast<std::int32_t>(i));
    cursor = s.buffer_offset + s.nbytes > cursor ? s.buffer_offset + s.nbytes : cursor;
  }
  if (direction == PackDirection::Pack && total_bytes > cursor) add(cursor, total_bytes - cursor, -1);
  return chunks;
}

}  // namespace tensortree::detail
