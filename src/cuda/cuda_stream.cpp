// CopyStream and CopyEvent: the asynchronous copies staging overlaps with host transfers.
#include <cuda_runtime_api.h>

#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/stream_order.hpp"
#include "tensortree/error.hpp"

namespace tensortree::cuda {

namespace {

cudaStream_t stream_of(void* handle) { return static_cast<cudaStream_t>(handle); }
cudaEvent_t event_of(void* handle) { return static_cast<cudaEvent_t>(handle); }

}  // namespace

CopyStream::CopyStream(int device) : device_(device) {
  DeviceGuard guard(device);
  // Blocking: copies wait for the legacy default stream's earlier work, so a tensor written there
  // is complete before staging reads it. Owned as a raw handle: core/cuda_api.hpp names no CUDA type.
  handle_ = detail::make_stream(detail::StreamKind::Blocking).release();
}

CopyStream::~CopyStream() {
  // cudaStreamDestroy returns at once; work already queued still completes.
  if (handle_ != nullptr) detail::StreamDeleter{}(stream_of(handle_));
}

void CopyStream::copy_async(void* dst, const void* src, std::size_t nbytes) const {
  if (nbytes == 0) return;
  DeviceGuard guard(device_);
  detail::order_after_current_stream();
  TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream_of(handle_)));
}

void CopyStream::copy_rows_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                                 std::size_t width, std::size_t rows) const {
  if (width == 0 || rows == 0) return;
  if (dst_pitch < width || src_pitch < width) {
    throw InvalidArgument(fmt::format("CopyStream::copy_rows_async: pitches {} and {} must be at least the width {}",
                                      dst_pitch, src_pitch, width));
  }
  // Rows that already lie next to each other at both ends are one plain copy.
  if (rows == 1 || (dst_pitch == width && src_pitch == width)) {
    copy_async(dst, src, width * rows);
    return;
  }
  DeviceGuard guard(device_);
  // cudaMemcpy2DAsync refuses pitches above the device's limit (about 2 GiB): longer pieces go row
  // by row.
  int max_pitch = 0;
  TT_CUDA_CHECK(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, device_));
  const auto limit = static_cast<std::size_t>(max_pitch);
  if (dst_pitch > limit || src_pitch > limit) {
    for (std::size_t r = 0; r < rows; ++r) {
      copy_async(static_cast<std::byte*>(dst) + r * dst_pitch, static_cast<const std::byte*>(src) + r * src_pitch,
                 width);
    }
    return;
  }
  detail::order_after_current_stream();
  TT_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault, stream_of(handle_)));
}

void CopyStream::wait() const { TT_CUDA_CHECK(cudaStreamSynchronize(stream_of(handle_))); }

void CopyStream::wait_quietly() const noexcept {
  if (handle_ != nullptr) cudaStreamSynchronize(stream_of(handle_));
}

CopyEvent::CopyEvent(int device) : device_(device) {
  DeviceGuard guard(device);
  handle_ = detail::make_event().release();
}

CopyEvent::~CopyEvent() {
  if (handle_ != nullptr) detail::EventDeleter{}(event_of(handle_));
}

void CopyEvent::record(const CopyStream& stream) {
  DeviceGuard guard(device_);
  TT_CUDA_CHECK(cudaEventRecord(event_of(handle_), stream_of(stream.handle_)));
}

bool CopyEvent::done() const { return detail::event_reached(event_of(handle_)); }

void CopyEvent::wait() const { TT_CUDA_CHECK(cudaEventSynchronize(event_of(handle_))); }

void CopyEvent::wait_quietly() const noexcept {
  if (handle_ != nullptr) cudaEventSynchronize(event_of(handle_));
}

}  // namespace tensortree::cuda
