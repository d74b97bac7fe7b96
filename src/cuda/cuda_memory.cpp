#include <cuda_runtime_api.h>

#include <cstring>

#include "core/cuda_api.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "cuda/stream_order.hpp"

namespace tensortree::cuda {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the sticky error and report none
    return 0;
  }
  return count;
}

int current_device() {
  int device = 0;
  TT_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) { TT_CUDA_CHECK(cudaSetDevice(device)); }

std::array<std::byte, 16> device_uuid(int device) {
  cudaDeviceProp properties{};
  TT_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  std::array<std::byte, 16> uuid{};
  static_assert(sizeof properties.uuid.bytes == uuid.size());
  std::memcpy(uuid.data(), properties.uuid.bytes, uuid.size());
  return uuid;
}

void* alloc_device(std::size_t nbytes, int device) {
  if (nbytes == 0) return nullptr;
  DeviceGuard guard(device);
  void* ptr = nullptr;
  TT_CUDA_CHECK(cudaMalloc(&ptr, nbytes));
  return ptr;
}

void free_device(void* ptr, int device) noexcept {
  if (ptr == nullptr) return;
  // A destructor path: nothing may throw. cudaFree needs the owning device current.
  DeviceGuard guard(device, std::nothrow);
  cudaFree(ptr);
}

void* alloc_pinned(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  void* ptr = nullptr;
  TT_CUDA_CHECK(cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable));
  return ptr;
}

void free_pinned(void* ptr) noexcept {
  if (ptr != nullptr) cudaFreeHost(ptr);
}

void copy_bytes(void* dst, const void* src, std::size_t nbytes) {
  if (nbytes == 0) return;
  detail::order_after_current_stream();
  TT_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault));
}

}  // namespace tensortree::cuda
