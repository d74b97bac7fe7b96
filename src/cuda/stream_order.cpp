#include "cuda/stream_order.hpp"

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_handles.hpp"
#include "tensortree/cuda_stream.hpp"

namespace tensortree::detail {

namespace {

// One event per device for each thread that joins streams: recorded and waited for at once, so it
// is free again as soon as the wait is queued.
cudaEvent_t join_event(int device) {
  thread_local std::vector<CudaEvent> events;
  if (events.size() <= static_cast<std::size_t>(device)) events.resize(static_cast<std::size_t>(device) + 1);
  CudaEvent& event = events[static_cast<std::size_t>(device)];
  if (!event) event = make_event();
  return event.get();
}

}  // namespace

void order_after_current_stream() {
  const auto stream = static_cast<cudaStream_t>(current_cuda_stream());
  if (stream == nullptr || stream == cudaStreamLegacy) return;
  int device = 0;
  TT_CUDA_CHECK(cudaGetDevice(&device));
  const cudaEvent_t event = join_event(device);
  TT_CUDA_CHECK(cudaEventRecord(event, stream));
  TT_CUDA_CHECK(cudaStreamWaitEvent(cudaStreamLegacy, event, 0));
}

}  // namespace tensortree::detail
