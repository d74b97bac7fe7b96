// Packing on the GPU: any number of leaves, one kernel launch. core/pack_spans.hpp divides the
// work: one thread block per chunk of at most 16 KiB, so large leaves spread over every
// multiprocessor and thousands of tiny leaves still cost a single launch. The descriptors (spans,
// segments, strided views) travel in the kernel's parameters when they fit, so a tree of a few
// leaves needs no upload; larger sets are uploaded first. pack() waits for the kernel; pack_async()
// returns a Work, so that a consolidate-then-send pipeline never waits on the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/cuda_api.hpp"
#include "core/pack_spans.hpp"
#include "core/pinned_pool.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/cuda_messages.hpp"
#include "cuda/stream_order.hpp"
#include "tensortree/work.hpp"

namespace tensortree::cuda {

namespace {

using detail::PackDirection;
using detail::PackSegment;
using detail::StridedView;

using detail::PackChunk;
using detail::PackSpan;

// Measured on an H100 (8 x 8 MiB): a block of 256 threads per 16 KiB chunk, four loads in flight
// per thread and full occupancy copy at the speed of a device-to-device cudaMemcpy; one load in
// flight and 40 registers a thread ran 10% slower, eight loads in flight 50% slower.
constexpr int kThreads = 256;
constexpr int kBlocksPerMultiprocessor = 8;  // at most 32 registers a thread: full occupancy
constexpr int kUnroll = 4;                   // 16-byte loads in flight per thread before the stores
constexpr std::size_t kMaxBlocks = 0x7fffffff;  // a grid's x dimension

// The kernel's view of its descriptors.
struct Descriptors {
  const PackSpan* spans;
  std::uint32_t span_count;
  const PackSegment* segments;
  const StridedView* strided;
};

// Descriptors carried in the kernel's parameter space: with the other parameters they stay within
// the 4 KiB that every CUDA version accepts.
constexpr std::size_t kInlineBytes = 3840;
struct InlineDescriptors {
  std::uint32_t span_count;
  std::uint32_t segments_at;  // byte offsets into `bytes`
  std::uint32_t strided_at;
  alignas(16) std::byte bytes[kInlineBytes];

  __device__ Descriptors view() const {
    return {reinterpret_cast<const PackSpan*>(bytes), span_count,
            reinterpret_cast<const PackSegment*>(bytes + segments_at),
            reinterpret_cast<const StridedView*>(bytes + strided_at)};
  }
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

__device__ void move_chunk(PackDirection direction, const PackChunk& chunk, const PackSegment* segments,
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

// Every thread of the block searches the spans alike: the same addresses, served as broadcasts.
__device__ void move_block(PackDirection direction, const Descriptors& d, std::byte* buffer) {
  const PackChunk chunk = detail::locate_chunk(d.spans, d.span_count, blockIdx.x);
  move_chunk(direction, chunk, d.segments, d.strided, buffer);
}

__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    pack_kernel(PackDirection direction, Descriptors descriptors, std::byte* buffer) {
  move_block(direction, descriptors, buffer);
}

__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor)
    pack_inline_kernel(PackDirection direction, const __grid_constant__ InlineDescriptors descriptors,
                       std::byte* buffer) {
  move_block(direction, descriptors.view(), buffer);
}

constexpr std::size_t align_up(std::size_t n, std::size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// One pack's descriptors and where each array sits in one block of them.
struct PackJob {
  std::span<const PackSegment> segments;
  std::span<const StridedView> strided;
  const std::vector<PackSpan>* spans = nullptr;
  std::uint64_t chunk_count = 0;
  std::size_t segments_at = 0;
  std::size_t strided_at = 0;
  std::size_t total = 0;

  void write(std::byte* out) const {
    std::memcpy(out, spans->data(), spans->size() * sizeof(PackSpan));
    if (!segments.empty()) std::memcpy(out + segments_at, segments.data(), segments.size() * sizeof(PackSegment));
    if (!strided.empty()) std::memcpy(out + strided_at, strided.data(), strided.size() * sizeof(StridedView));
  }
  Descriptors at(std::byte* device) const {
    return {reinterpret_cast<const PackSpan*>(device), static_cast<std::uint32_t>(spans->size()),
            reinterpret_cast<const PackSegment*>(device + segments_at),
            reinterpret_cast<const StridedView*>(device + strided_at)};
  }
};

// The spans live in this thread's reusable vector, until the thread's next pack.
PackJob plan_job(PackDirection direction, std::span<const PackSegment> segments,
                 std::span<const StridedView> strided, std::uint64_t total_bytes) {
  thread_local std::vector<PackSpan> spans;
  spans.clear();
  PackJob job{segments, strided, &spans};
  job.chunk_count = detail::append_pack_spans(direction, segments, total_bytes, spans);
  if (job.chunk_count > kMaxBlocks) throw_too_many_pack_chunks(total_bytes, kMaxBlocks, detail::kPackChunkBytes);
  job.segments_at = align_up(spans.size() * sizeof(PackSpan), 16);
  job.strided_at = align_up(job.segments_at + segments.size() * sizeof(PackSegment), 16);
  job.total = job.strided_at + strided.size() * sizeof(StridedView);
  return job;
}

// Launches the job with its descriptors as parameters when they fit; false when they do not.
bool launch_inline(PackDirection direction, const PackJob& job, std::byte* buffer) {
  if (job.total > kInlineBytes) return false;
  InlineDescriptors inline_descriptors;
  inline_descriptors.span_count = static_cast<std::uint32_t>(job.spans->size());
  inline_descriptors.segments_at = static_cast<std::uint32_t>(job.segments_at);
  inline_descriptors.strided_at = static_cast<std::uint32_t>(job.strided_at);
  job.write(inline_descriptors.bytes);
  pack_inline_kernel<<<static_cast<unsigned>(job.chunk_count), kThreads, 0, cudaStreamLegacy>>>(
      direction, inline_descriptors, buffer);
  TT_CUDA_CHECK(cudaGetLastError());
  return true;
}

void launch_uploaded(PackDirection direction, const PackJob& job, std::byte* descriptors, std::byte* buffer) {
  pack_kernel<<<static_cast<unsigned>(job.chunk_count), kThreads, 0, cudaStreamLegacy>>>(direction,
                                                                                         job.at(descriptors), buffer);
  TT_CUDA_CHECK(cudaGetLastError());
}

// What pack_async() returns: complete once the kernel has run. Until then it holds the pinned
// descriptors the upload reads and whatever the caller asked to keep alive (the leaves).
class PackWork final : public Work {
 public:
  PackWork(detail::CudaEvent done, detail::PinnedLease staging, std::shared_ptr<const void> keep_alive)
      : done_(std::move(done)), staging_(std::move(staging)), keep_alive_(std::move(keep_alive)) {}
  // The device may still read the staging and the leaves: they go only after it has.
  ~PackWork() override {
    if (!reached_) cudaEventSynchronize(done_.get());
  }

 protected:
  bool test() override {
    if (!reached_) reached_ = detail::event_reached(done_.get());
    return reached_;
  }
  void block() override {
    TT_CUDA_CHECK(cudaEventSynchronize(done_.get()));
    reached_ = true;
  }
  bool queue_stream_wait(CudaStreamHandle stream) override {
    TT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), done_.get(), 0));
    return true;
  }

 private:
  detail::CudaEvent done_;
  detail::PinnedLease staging_;
  std::shared_ptr<const void> keep_alive_;
  bool reached_ = false;
};

// Grow-only descriptor scratch (pinned staging + device copy) per device, for the synchronous
// pack. Deliberately kept for the life of the process: freeing CUDA memory from static destructors
// races the runtime's own teardown.
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

}  // namespace

void pack(PackDirection direction, std::span<const PackSegment> segments, std::span<const StridedView> strided,
          std::byte* buffer, std::uint64_t total_bytes, int device) {
  const PackJob job = plan_job(direction, segments, strided, total_bytes);
  if (job.chunk_count == 0) return;
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  if (!launch_inline(direction, job, buffer)) {
    static std::mutex mutex;
    static std::vector<DescriptorScratch> scratch(static_cast<std::size_t>(device_count()));
    const std::lock_guard lock(mutex);
    DescriptorScratch& mine = scratch.at(static_cast<std::size_t>(device));
    std::byte* staging = mine.host(job.total);
    job.write(staging);
    std::byte* descriptors = mine.device(job.total);
    TT_CUDA_CHECK(cudaMemcpyAsync(descriptors, staging, job.total, cudaMemcpyHostToDevice, cudaStreamLegacy));
    launch_uploaded(direction, job, descriptors, buffer);
    // The scratch is reused by the next pack: wait while the lock still guards it.
    TT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    return;
  }
  TT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

WorkPtr pack_async(PackDirection direction, std::span<const PackSegment> segments,
                   std::span<const StridedView> strided, std::byte* buffer, std::uint64_t total_bytes, int device,
                   std::shared_ptr<const void> keep_alive) {
  const PackJob job = plan_job(direction, segments, strided, total_bytes);
  if (job.chunk_count == 0) return Work::completed();
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  detail::PinnedLease staging;
  if (!launch_inline(direction, job, buffer)) {
    // Descriptors of their own, from the stream-ordered allocator: freed behind the kernel, in
    // stream order, so no later pack can overwrite them while this one reads them.
    staging = detail::PinnedPool::shared().acquire(job.total);
    job.write(staging.data());
    void* descriptors = nullptr;
    TT_CUDA_CHECK(cudaMallocAsync(&descriptors, job.total, cudaStreamLegacy));
    TT_CUDA_CHECK(cudaMemcpyAsync(descriptors, staging.data(), job.total, cudaMemcpyHostToDevice, cudaStreamLegacy));
    launch_uploaded(direction, job, static_cast<std::byte*>(descriptors), buffer);
    TT_CUDA_CHECK(cudaFreeAsync(descriptors, cudaStreamLegacy));
  }
  detail::CudaEvent done = detail::make_event();
  TT_CUDA_CHECK(cudaEventRecord(done.get(), cudaStreamLegacy));
  return std::make_shared<PackWork>(std::move(done), std::move(staging), std::move(keep_alive));
}

}  // namespace tensortree::cuda
