#include "cuda/cuda_device_guard.hpp"

#include <cuda_runtime_api.h>

#include "cuda/cuda_check.hpp"
#include "cuda/driver_function.hpp"

namespace tensortree::cuda {

bool primary_context_active(int device) noexcept {
  using GetState = int (*)(int device, unsigned int* flags, int* active);
  static const auto get_state = driver_function<GetState>("cuDevicePrimaryCtxGetState");
  unsigned int flags = 0;
  int active = 0;
  if (get_state == nullptr || get_state(device, &flags, &active) != 0) return true;
  return active != 0;
}

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  TT_CUDA_CHECK(cudaGetDevice(&current));
  if (current == device) return;
  const bool restore = primary_context_active(current);
  TT_CUDA_CHECK(cudaSetDevice(device));
  if (restore) previous_ = current;
}

DeviceGuard::DeviceGuard(int device, std::nothrow_t) noexcept {
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess || current == device) return;
  const bool restore = primary_context_active(current);
  if (cudaSetDevice(device) == cudaSuccess && restore) previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // a device that was current (with a context) cannot fail
}

}  // namespace tensortree::cuda
