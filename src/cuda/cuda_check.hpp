// TT_CUDA_CHECK(call): throws BackendError with CUDA's message, the call and file:line.
#pragma once

#include <cuda_runtime_api.h>

#include "core/foreign_error.hpp"

namespace tensortree::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw_foreign_error("CUDA", call, cudaGetErrorString(status), static_cast<long>(status), file, line);
}

}  // namespace tensortree::detail

#define TT_CUDA_CHECK(call) TT_FOREIGN_CHECK(call, #call, cudaSuccess, ::tensortree::detail::throw_cuda_error)
