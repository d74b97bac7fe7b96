#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "core/text_format.hpp"
#include "cuda/cuda_ipc.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "cuda/driver_function.hpp"
#include "cuda/stream_order.hpp"
#include "tensortree/error.hpp"

namespace tensortree::cuda::ipc {

namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(Handle));

template <class Native>
Handle to_handle(const Native& native) {
  Handle handle{};
  std::memcpy(handle.data(), &native, sizeof native);
  return handle;
}

template <class Native>
Native from_handle(const Handle& handle) {
  Native native{};
  std::memcpy(&native, handle.data(), sizeof native);
  return native;
}

}  // namespace

Handle memory_handle(void* base, int device) {
  DeviceGuard guard(device);
  cudaIpcMemHandle_t native{};
  TT_CUDA_CHECK(cudaIpcGetMemHandle(&native, base));
  return to_handle(native);
}

void* open_memory(const Handle& handle, int device) {
  DeviceGuard guard(device);
  void* mapped = nullptr;
  TT_CUDA_CHECK(
      cudaIpcOpenMemHandle(&mapped, from_handle<cudaIpcMemHandle_t>(handle), cudaIpcMemLazyEnablePeerAccess));
  return mapped;
}

void close_memory(void* mapped, int device) noexcept {
  DeviceGuard guard(device, std::nothrow);
  cudaIpcCloseMemHandle(mapped);
}

std::size_t allocation_bytes(const void* ptr, int device) {
  using GetAddressRange = int (*)(unsigned long long* base, std::size_t* size, unsigned long long ptr);
  static const auto get_range = driver_function<GetAddressRange>("cuMemGetAddressRange");
  if (get_range == nullptr) throw tensortree::BackendError("the CUDA driver has no cuMemGetAddressRange");
  DeviceGuard guard(device);
  unsigned long long base = 0;
  std::size_t size = 0;
  const int status = get_range(&base, &size, reinterpret_cast<unsigned long long>(ptr));
  if (status != 0 || base != reinterpret_cast<unsigned long long>(ptr)) {
    throw tensortree::CorruptData(fmt::format("CUDA IPC: the opened memory is not the start of an allocation (driver "
                                              "status {})", status));
  }
  return size;
}

void finish_writes(int device) {
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  TT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

// On the legacy stream, which the library's kernels and copies use: the copy neither overtakes
// work queued on the destination nor is overtaken by later work on it.
void copy_and_wait(void* dst, const void* src, std::size_t nbytes, int device) {
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  if (nbytes > 0) TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy));
  TT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

}  // namespace tensortree::cuda::ipc
