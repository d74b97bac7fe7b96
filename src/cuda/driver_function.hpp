// Driver API functions through the CUDA runtime's entry point, so that the library links only the
// runtime (libcudart) and not the driver library (libcuda).
#pragma once

#include <cuda_runtime_api.h>

namespace tensortree::cuda {

// The driver function `name` as of CUDA 12.0's signature, or nullptr when this driver lacks it.
template <class Function>
Function driver_function(const char* name) noexcept {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Function>(function);
}

}  // namespace tensortree::cuda
