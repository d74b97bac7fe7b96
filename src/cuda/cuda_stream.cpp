// CopyStream and CopyEvent: the asynchronous copies staging overlaps with host transfers.
#include <cuda_runtime_api.h>

#include "core/cuda_api.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"

namespace tensortree::cuda {

namespace {

cudaStream_t stream_of(void* handle) { return static_cast<cudaStream_t>(handle); }
cudaEvent_t event_of(void* handle) { return static_cast<cudaEvent_t>(handle); }

}  // namespace

CopyStream::CopyStream(int device) : device_(device) {
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  // Blocking (not cudaStreamNonBlocking): copies wait for the legacy default stream's earlier
  // work, so a tensor written there is complete before staging reads it.
  TT_CUDA_CHECK(cudaStreamCreate(&stream));
  handle_ = stream;
}

CopyStream::~CopyStream() {
  // cudaStreamDestroy returns at once; work already queued still completes.
  if (handle_ != nullptr) cudaStreamDestroy(stream_of(handle_));
}

void CopyStream::copy_async(void* dst, const void* src, std::size_t nbytes) const {
  if (nbytes == 0) return;
  DeviceGuard guard(device_);
  TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream_of(handle_)));
}

void CopyStream::wait() const { TT_CUDA_CHECK(cudaStreamSynchronize(stream_of(handle_))); }

void CopyStream::wait_quietly() const noexcept {
  if (handle_ != nullptr) cudaStreamSynchronize(stream_of(handle_));
}

CopyEvent::CopyEvent(int device) : device_(device) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  TT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  handle_ = event;
}

CopyEvent::~CopyEvent() {
  if (handle_ != nullptr) cudaEventDestroy(event_of(handle_));
}

void CopyEvent::record(const CopyStream& stream) {
  DeviceGuard guard(device_);
  TT_CUDA_CHECK(cudaEventRecord(event_of(handle_), stream_of(stream.handle_)));
}

bool CopyEvent::done() const {
  const cudaError_t status = cudaEventQuery(event_of(handle_));
  if (status == cudaErrorNotReady) return false;
  TT_CUDA_CHECK(status);
  return true;
}

void CopyEvent::wait() const { TT_CUDA_CHECK(cudaEventSynchronize(event_of(handle_))); }

void CopyEvent::wait_quietly() const noexcept {
  if (handle_ != nullptr) cudaEventSynchronize(event_of(handle_));
}

}  // namespace tensortree::cuda
