// TT_CUDA_CHECK(call): throws BackendError with CUDA's message, the call and file:line.
#pragma once

#include <cuda_runtime_api.h>

#include "foreign_error.hpp"

#define TT_CUDA_CHECK(call)                                                              \
  do {                                                                                   \
    const cudaError_t tt_status_ = (call);                                               \
    if (tt_status_ != cudaSuccess) {                                                     \
      ::tensortree::detail::throw_foreign_error("CUDA", #call, cudaGetErrorString(tt_status_), \
                                                static_cast<long>(tt_status_), __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)
