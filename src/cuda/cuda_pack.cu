// Packing on the GPU: any number of leaves, one descriptor upload, one kernel launch.
//
// The host cuts every segment (and, when packing, every gap between segments) into chunks of at
// most kChunkBytes; one thread block moves one chunk. Large leaves so spread over every
// multiprocessor and thousands of tiny leaves still cost a single launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/cuda_api.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "cuda/cuda_messages.hpp"
#include "cuda/stream_order.hpp"

namespace tensortree::cuda {

namespace {

using detail::PackDirection;
using detail::PackSegment;
using detail::StridedView;

// Measured on an H100 (8 x 8 MiB): 16 KiB chunks, a block each, four loads in flight per thread
// and full occupancy copy at the speed of a device-to-device cudaMemcpy; 64 KiB chunks, one load
// in flight and 40 registers a thread ran 10% slower, eight loads in flight 50% slower.
constexpr std::uint32_t kChunkBytes = 16 * 1024;
constexpr int kThreads = 256;
constexpr int kBlocksPerMultiprocessor = 8;  // at most 32 registers a thread: full occupancy
constexpr int kUnroll = 4;                   // 16-byte loads in flight per thread before the stores
constexpr std::size_t kMaxBlocks = 0x7fffffff;  // a grid's x dimension

struct Chunk {
  std::uint64_t buffer_offset;
  std::uint32_t nbytes;
  std::int32_t segment;  // -1: a gap to zero
};

// Each thread issues kUnroll independent 16-byte loads before storing any: a copy loop with one
// load in flight per thread leaves most of the memory system idle.
__device__ void move_vectors(uint4* __restrict__ dst, const uint4* __restrict__ src, std::uint32_t count) {
  std::uint32_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * blockDim.x < count; i += kUnroll * blockDim.x) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = src[i + k * blockDim.x];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) dst[i + k * blockDim.x] = v[k];
  }
  for (; i < count; i += blockDim.x) dst[i] = src[i];
}

__device__ void move_bytes(std::byte* dst, const std::byte* src, std::uint32_t nbytes) {
  const bool vectorizable = ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) |
                              nbytes) & 15u) == 0;
  if (vectorizable) {
    move_vectors(reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src), nbytes / 16);
  } else {
    for (std::uint32_t i = threadIdx.x; i < nbytes; i += blockDim.x) dst[i] = src[i];
  }
}

__device__ std::byte* strided_element(const StridedView& view, std::int64_t linear, std::uint32_t itemsize) {
  std::int64_t offset = 0;
  for (int d = view.ndim - 1; d >= 0; --d) {
    offset += (linear % view.shape[d]) * view.strides[d];
    linear /= view.shape[d];
  }
  return view.data + offset * itemsize;
}

__device__ void move_strided(PackDirection direction, const StridedView& view, std::uint32_t itemsize,
                             std::int64_t first, std::int64_t count, std::byte* buffer) {
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    std::byte* leaf = strided_element(view, first + i, itemsize);
    std::byte* packed = buffer + i * itemsize;
    std::byte* dst = direction == PackDirection::Pack ? packed : leaf;
    const std::byte* src = direction == PackDirection::Pack ? leaf : packed;
    for (std::uint32_t b = 0; b < itemsize; ++b) dst[b] = src[b];
  }
}

__device__ void move_chunk(PackDirection direction, const Chunk& chunk, const PackSegment* segments,
                           const StridedView* strided, std::byte* buffer) {
  std::byte* packed = buffer + chunk.buffer_offset;
  if (chunk.segment < 0) {
    for (std::uint32_t i = threadIdx.x; i < chunk.nbytes; i += blockDim.x) packed[i] = std::byte{0};
    return;
  }
  const PackSegment& segment = segments[chunk.segment];
  const std::uint64_t offset_in_leaf = chunk.buffer_offset - segment.buffer_offset;
  if (segment.strided_index >= 0) {
    move_strided(direction, strided[segment.strided_index], segment.itemsize,
                 static_cast<std::int64_t>(offset_in_leaf / segment.itemsize),
                 static_cast<std::int64_t>(chunk.nbytes / segment.itemsize), packed);
    return;
  }
  std::byte* leaf = segment.leaf_data + offset_in_leaf;
  if (direction == PackDirection::Pack) {
    move_bytes(packed, leaf, chunk.nbytes);
  } else {
    move_bytes(leaf, packed, chunk.nbytes);
  }
}

__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    pack_kernel(PackDirection direction, const Chunk* chunks, const PackSegment* segments,
                const StridedView* strided, std::byte* buffer) {
  move_chunk(direction, chunks[blockIdx.x], segments, strided, buffer);
}

// Calls span(buffer_offset, nbytes, segment) for every segment in order and, when packing, for the
// gaps before, between and after them (segment -1: bytes to zero).
template <class Fn>
void for_each_span(PackDirection direction, std::span<const PackSegment> segments, std::uint64_t total_bytes,
                   Fn&& span) {
  std::uint64_t cursor = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const PackSegment& s = segments[i];
    if (direction == PackDirection::Pack && s.buffer_offset > cursor) span(cursor, s.buffer_offset - cursor, -1);
    span(s.buffer_offset, s.nbytes, static_cast<std::int32_t>(i));
    cursor = std::max(cursor, s.buffer_offset + s.nbytes);
  }
  if (direction == PackDirection::Pack && total_bytes > cursor) span(cursor, total_bytes - cursor, -1);
}

std::uint64_t chunks_in(std::uint64_t nbytes) { return nbytes / kChunkBytes + (nbytes % kChunkBytes != 0); }

std::uint64_t count_chunks(PackDirection direction, std::span<const PackSegment> segments, std::uint64_t total_bytes) {
  std::uint64_t count = 0;
  for_each_span(direction, segments, total_bytes,
                [&](std::uint64_t, std::uint64_t nbytes, std::int32_t) { count += chunks_in(nbytes); });
  return count;
}

// Writes the chunks count_chunks() counted to `out`, in place: the pinned descriptor staging.
void write_chunks(PackDirection direction, std::span<const PackSegment> segments, std::uint64_t total_bytes,
                  Chunk* out) {
  for_each_span(direction, segments, total_bytes, [&](std::uint64_t offset, std::uint64_t nbytes, std::int32_t segment) {
    for (std::uint64_t done = 0; done < nbytes; done += kChunkBytes) {
      *out++ = {offset + done, static_cast<std::uint32_t>(std::min<std::uint64_t>(kChunkBytes, nbytes - done)),
                segment};
    }
  });
}

// Grow-only descriptor scratch (pinned staging + device copy) per device. Deliberately kept for
// the life of the process: freeing CUDA memory from static destructors races the runtime's own
// teardown.
class DescriptorScratch {
 public:
  std::byte* host(std::size_t nbytes) {
    if (nbytes > host_capacity_) {
      if (host_) cudaFreeHost(host_);
      host_ = nullptr;
      TT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), nbytes, cudaHostAllocPortable));
      host_capacity_ = nbytes;
    }
    return host_;
  }
  std::byte* device(std::size_t nbytes) {
    if (nbytes > device_capacity_) {
      if (device_) cudaFree(device_);
      device_ = nullptr;
      TT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_), nbytes));
      device_capacity_ = nbytes;
    }
    return device_;
  }

 private:
  std::byte* host_ = nullptr;
  std::size_t host_capacity_ = 0;
  std::byte* device_ = nullptr;
  std::size_t device_capacity_ = 0;
};

constexpr std::size_t align_up(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

void pack(PackDirection direction, std::span<const PackSegment> segments, std::span<const StridedView> strided,
          std::byte* buffer, std::uint64_t total_bytes, int device) {
  const std::uint64_t chunk_count = count_chunks(direction, segments, total_bytes);
  if (chunk_count == 0) return;
  if (chunk_count > kMaxBlocks) throw_too_many_pack_chunks(total_bytes, kMaxBlocks, kChunkBytes);
  const std::size_t chunk_bytes = align_up(static_cast<std::size_t>(chunk_count) * sizeof(Chunk));
  const std::size_t segment_bytes = align_up(segments.size() * sizeof(PackSegment));
  const std::size_t strided_bytes = align_up(strided.size() * sizeof(StridedView));
  const std::size_t total = chunk_bytes + segment_bytes + strided_bytes;

  static std::mutex mutex;
  static std::vector<DescriptorScratch> scratch(static_cast<std::size_t>(device_count()));
  const std::lock_guard lock(mutex);
  DeviceGuard guard(device);
  DescriptorScratch& mine = scratch.at(static_cast<std::size_t>(device));
  std::byte* staging = mine.host(total);
  write_chunks(direction, segments, total_bytes, reinterpret_cast<Chunk*>(staging));
  if (!segments.empty()) std::memcpy(staging + chunk_bytes, segments.data(), segments.size() * sizeof(PackSegment));
  if (!strided.empty()) {
    std::memcpy(staging + chunk_bytes + segment_bytes, strided.data(), strided.size() * sizeof(StridedView));
  }
  std::byte* descriptors = mine.device(total);
  detail::order_after_current_stream();
  TT_CUDA_CHECK(cudaMemcpyAsync(descriptors, staging, total, cudaMemcpyHostToDevice, cudaStreamLegacy));
  pack_kernel<<<static_cast<unsigned>(chunk_count), kThreads>>>(
      direction, reinterpret_cast<const Chunk*>(descriptors),
      reinterpret_cast<const PackSegment*>(descriptors + chunk_bytes),
      reinterpret_cast<const StridedView*>(descriptors + chunk_bytes + segment_bytes), buffer);
  TT_CUDA_CHECK(cudaGetLastError());
  TT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

}  // namespace tensortree::cuda
