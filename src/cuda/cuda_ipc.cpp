#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
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
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(Handle));

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

// One non-blocking stream per device for the transport's copies: they neither wait for nor hold
// up work on the legacy default stream.
cudaStream_t transport_stream(int device) {
  constexpr int kMaxDevices = 64;
  static cudaStream_t streams[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return nullptr;
  static std::once_flag created[kMaxDevices];
  std::call_once(created[device], [device] {
    DeviceGuard guard(device);
    TT_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking));
  });
  return streams[device];
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

void* create_event(int device) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  TT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventInterprocess));
  return event;
}

Handle event_handle(void* event, int device) {
  DeviceGuard guard(device);
  cudaIpcEventHandle_t native{};
  TT_CUDA_CHECK(cudaIpcGetEventHandle(&native, static_cast<cudaEvent_t>(event)));
  return to_handle(native);
}

void* open_event(const Handle& handle, int device) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  TT_CUDA_CHECK(cudaIpcOpenEventHandle(&event, from_handle<cudaIpcEventHandle_t>(handle)));
  return event;
}

void destroy_event(void* event, int device) noexcept {
  DeviceGuard guard(device, std::nothrow);
  cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void copy_and_record(void* dst, const void* src, std::size_t nbytes, void* event, int device) {
  DeviceGuard guard(device);
  const cudaStream_t stream = transport_stream(device);
  // The source was written on the legacy stream (the library's copies and kernels), or on the
  // caller's, which the legacy stream then waits for: ordered first.
  detail::order_after_current_stream();
  TT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  if (nbytes > 0) TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream));
  TT_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), stream));
}

void copy_after(void* dst, const void* src, std::size_t nbytes, void* event, int device) {
  DeviceGuard guard(device);
  const cudaStream_t stream = transport_stream(device);
  TT_CUDA_CHECK(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(event), 0));
  if (nbytes > 0) TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream));
  TT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace tensortree::cuda::ipc
