// Makes `device` current for a scope and restores the previous device afterwards.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/cuda_check.hpp"

namespace tensortree::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    TT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device != previous_) TT_CUDA_CHECK(cudaSetDevice(device));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { cudaSetDevice(previous_); }  // restoring a device that was current cannot fail

 private:
  int previous_ = 0;
};

}  // namespace tensortree::cuda
