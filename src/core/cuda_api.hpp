// The library's only window onto CUDA. Callers include this header, never the CUDA headers, so the
// library builds without CUDA: then cuda_absent.cpp implements it (no devices; allocations throw
// NotSupported).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "core/elementwise.hpp"
#include "core/pack_plan.hpp"
#include "core/strided_view.hpp"
#include "tensortree/dtype.hpp"

namespace tensortree {
class Work;
}  // namespace tensortree

namespace tensortree::cuda {

int device_count() noexcept;
int current_device();
// Makes `device` the calling thread's current device.
void set_device(int device);
// The device's UUID: the same on every process that sees that GPU, whatever its index there.
std::array<std::byte, 16> device_uuid(int device);

void* alloc_device(std::size_t nbytes, int device);
void free_device(void* ptr, int device) noexcept;
void* alloc_pinned(std::size_t nbytes);
void free_pinned(void* ptr) noexcept;

// Synchronous copy between any two of host, pinned host and device memory (unified addressing).
void copy_bytes(void* dst, const void* src, std::size_t nbytes);

// A CUDA stream for copies that overlap host work (staging). It is a blocking stream: its work
// starts after what the legacy default stream had queued, as a cudaMemcpy's would. Move-only.
class CopyStream {
 public:
  CopyStream() = default;
  explicit CopyStream(int device);
  CopyStream(CopyStream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_) {}
  CopyStream& operator=(CopyStream&& other) noexcept {
    std::swap(handle_, other.handle_);
    std::swap(device_, other.device_);
    return *this;
  }
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;
  ~CopyStream();

  int device() const { return device_; }
  // Queues a copy between any two of pinned host and device memory; returns at once.
  void copy_async(void* dst, const void* src, std::size_t nbytes) const;
  // Queues copies of `rows` runs of `width` bytes, the r-th from src + r * src_pitch to
  // dst + r * dst_pitch (a pitch is at least `width`); returns at once. One strided copy where the
  // device allows such pitches, else one copy per row.
  void copy_rows_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
                       std::size_t rows) const;
  // Blocks until everything queued so far has finished.
  void wait() const;
  // As wait(), for destructors: errors are ignored.
  void wait_quietly() const noexcept;

 private:
  friend class CopyEvent;
  void* handle_ = nullptr;  // cudaStream_t
  int device_ = -1;
};

// Marks a point in a CopyStream, to learn without blocking when the copies before it have finished.
class CopyEvent {
 public:
  CopyEvent() = default;
  explicit CopyEvent(int device);
  CopyEvent(CopyEvent&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_) {}
  CopyEvent& operator=(CopyEvent&& other) noexcept {
    std::swap(handle_, other.handle_);
    std::swap(device_, other.device_);
    return *this;
  }
  CopyEvent(const CopyEvent&) = delete;
  CopyEvent& operator=(const CopyEvent&) = delete;
  ~CopyEvent();

  // Marks the end of what `stream` has queued so far (replacing an earlier mark).
  void record(const CopyStream& stream);
  // Whether everything before the mark has finished (true when never recorded). Never blocks.
  bool done() const;
  // Blocks until everything before the mark has finished.
  void wait() const;
  // As wait(), for destructors: errors are ignored.
  void wait_quietly() const noexcept;

 private:
  void* handle_ = nullptr;  // cudaEvent_t
  int device_ = -1;
};

// Element-wise copy between two strided views of the same shape on one device, in one launch.
void copy_strided(const detail::StridedView& dst, const detail::StridedView& src,
                  std::size_t itemsize, int device);

// Element-wise operations over strided views of one shape on one device (inputs broadcast with
// stride 0), one kernel launch each; synchronous. Operands and output hold `dtype` (the compute
// dtype; the output is bool for comparisons), one that detail::kernel_computes (type_promotion.hpp):
// NotSupported for the others.
void elementwise_binary(detail::BinaryOp op, DType dtype, const detail::StridedView& out,
                        const detail::StridedView& a, const detail::StridedView& b, int device);
void elementwise_scalar(detail::BinaryOp op, DType dtype, const detail::StridedView& out,
                        const detail::StridedView& a, double scalar, bool scalar_first, int device);
void elementwise_unary(detail::UnaryOp op, DType dtype, const detail::StridedView& out,
                       const detail::StridedView& a, double lo, double hi, int device);
// Converts every element of `in` into `out` (same shape), as Tensor::to(DType).
void convert(const detail::StridedView& out, DType out_dtype, const detail::StridedView& in, DType in_dtype,
             int device);

// Moves every segment between the leaves and `buffer` (all on `device`) with one kernel launch (and
// a descriptor upload only when the descriptors outgrow the kernel's parameters); when packing,
// bytes between segments are zeroed. Synchronous.
void pack(detail::PackDirection direction, std::span<const detail::PackSegment> segments,
          std::span<const detail::StridedView> strided, std::byte* buffer, std::uint64_t total_bytes,
          int device);
// pack() queued on the legacy default stream without waiting for it: later library work on the
// device is ordered after it, and the returned Work completes when it has run (make_stream_wait
// orders another stream after it on the device). `keep_alive` (what owns the leaves and the buffer)
// is held until then; the segments are read before this returns.
[[nodiscard]] std::shared_ptr<Work> pack_async(detail::PackDirection direction,
                                               std::span<const detail::PackSegment> segments,
                                               std::span<const detail::StridedView> strided, std::byte* buffer,
                                               std::uint64_t total_bytes, int device,
                                               std::shared_ptr<const void> keep_alive);

}  // namespace tensortree::cuda
