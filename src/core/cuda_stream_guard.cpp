#include "tensortree/cuda_stream.hpp"

namespace tensortree {

namespace {
thread_local CudaStreamHandle current_stream = nullptr;
}  // namespace

CudaStreamHandle current_cuda_stream() noexcept { return current_stream; }

CudaStreamGuard::CudaStreamGuard(CudaStreamHandle stream) noexcept : previous_(current_stream) {
  if (stream != nullptr) current_stream = stream;
}

CudaStreamGuard::~CudaStreamGuard() { current_stream = previous_; }

}  // namespace tensortree
