// Makes `device` current for a scope and puts the thread's previous device back afterwards, unless
// the previous device has no context yet: a thread that never chose a device reports device 0, and
// under CUDA 12+ making a device current creates its primary context (hundreds of MiB on a GPU the
// program may never use). Such a thread stays on `device`, as PyTorch's guards leave it.
#pragma once

#include <new>

namespace tensortree::cuda {

// Whether `device`'s primary context exists (cuDevicePrimaryCtxGetState, through the runtime's
// entry point: no link against the driver library). True when it cannot be told.
bool primary_context_active(int device) noexcept;

class DeviceGuard {
 public:
  // BackendError when `device` cannot be made current.
  explicit DeviceGuard(int device);
  // For paths that must not throw (destructors, frees): when `device` cannot be made current, the
  // scope runs on the current device.
  DeviceGuard(int device, std::nothrow_t) noexcept;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard();

 private:
  int previous_ = -1;  // -1: nothing to put back
};

}  // namespace tensortree::cuda
