// RAII for the CUDA runtime's streams and events: the one family the library uses, for the copy
// streams behind core/cuda_api.hpp and for the NCCL transport (whose calls take the raw handles).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <type_traits>

namespace tensortree::detail {

struct StreamDeleter {
  void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};
struct EventDeleter {
  void operator()(cudaEvent_t event) const noexcept { cudaEventDestroy(event); }
};
using CudaStream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using CudaEvent = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;

// Whether a stream's work waits for what the legacy default stream queued before it.
enum class StreamKind {
  Blocking,     // it does: a tensor written on the default stream is complete before the stream reads it
  NonBlocking,  // it does not: work on it (NCCL's receives waiting for a peer) never stalls the default stream
};

// On the current device.
CudaStream make_stream(StreamKind kind);
// On the current device. These events only order work and mark completion: no timing.
CudaEvent make_event();
// True once every operation recorded before `event` has finished; "not ready" is no error (it is
// cleared, so that it does not surface in a later check).
bool event_reached(cudaEvent_t event);

}  // namespace tensortree::detail
