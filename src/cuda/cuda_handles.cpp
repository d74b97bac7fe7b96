#include "cuda/cuda_handles.hpp"

#include "cuda/cuda_check.hpp"

namespace tensortree::detail {

CudaStream make_stream(StreamKind kind) {
  cudaStream_t stream = nullptr;
  TT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, kind == StreamKind::Blocking ? cudaStreamDefault
                                                                                 : cudaStreamNonBlocking));
  return CudaStream(stream);
}

CudaEvent make_event() {
  cudaEvent_t event = nullptr;
  TT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return CudaEvent(event);
}

bool event_reached(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  TT_CUDA_CHECK(status);
  return true;
}

}  // namespace tensortree::detail
