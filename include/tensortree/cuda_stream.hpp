// The CUDA stream a thread orders the library's work after (c10d's "current stream"). The library
// runs its own copies and kernels on the legacy default stream; a tensor written on another stream
// (one that came from PyTorch through DLPack, say) is complete for an operation only if that
// operation waits for the stream. So every communication call first makes the legacy default
// stream wait for the ordering stream: CommOptions::stream for that call, else this thread's
// current stream. Work::make_stream_wait orders a stream after an operation in turn.
#pragma once

#include "tensortree/export.hpp"

namespace tensortree {

// A cudaStream_t, named without CUDA's headers. Null is the legacy default stream.
using CudaStreamHandle = void*;

// This thread's current stream; null (the legacy default stream) unless a CudaStreamGuard set one.
TT_API CudaStreamHandle current_cuda_stream() noexcept;

// Makes `stream` this thread's current stream while it lives, then restores the previous one. A
// null `stream` leaves the current one as it is (so that an option left unset changes nothing);
// to order after the legacy default stream inside another guard's scope, name it (cudaStreamLegacy).
class TT_API CudaStreamGuard {
 public:
  explicit CudaStreamGuard(CudaStreamHandle stream) noexcept;
  CudaStreamGuard(const CudaStreamGuard&) = delete;
  CudaStreamGuard& operator=(const CudaStreamGuard&) = delete;
  ~CudaStreamGuard();

 private:
  CudaStreamHandle previous_;
};

}  // namespace tensortree
