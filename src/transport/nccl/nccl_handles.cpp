#include "transport/nccl/nccl_handles.hpp"

#include "cuda/cuda_check.hpp"
#include "core/foreign_error.hpp"

namespace tensortree::detail {

CudaStream make_stream() {
  cudaStream_t stream = nullptr;
  TT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return CudaStream(stream);
}

CudaEvent make_event() {
  cudaEvent_t event = nullptr;
  TT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return CudaEvent(event);
}

bool event_reached(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is no failure: keep it from surfacing in a later check
    return false;
  }
  throw_foreign_error("CUDA", "cudaEventQuery", cudaGetErrorString(status), static_cast<long>(status),
                      __FILE__, __LINE__);
}

}  // namespace tensortree::detail
