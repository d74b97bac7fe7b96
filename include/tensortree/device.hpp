// Where a tensor's bytes live: the host, or one CUDA device.
#pragma once

#include <compare>
#include <ostream>
#include <string>
#include <string_view>

#include "tensortree/export.hpp"

namespace tensortree {

enum class DeviceType : unsigned char { CPU, CUDA };

class TT_API Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}

  static constexpr Device cpu() { return {}; }
  // index -1 means "the calling thread's current CUDA device", resolved when memory is allocated.
  static constexpr Device cuda(int index = -1) { return {DeviceType::CUDA, index}; }
  // "cpu", "cuda", "cuda:1"; anything else is InvalidArgument.
  static Device parse(std::string_view text);

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }

  // "cpu", "cuda", "cuda:0" as PyTorch prints them.
  std::string str() const;

  friend constexpr bool operator==(Device, Device) = default;

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = -1;
};

TT_API std::ostream& operator<<(std::ostream& os, Device device);

// Number of usable CUDA devices; 0 when built without CUDA or when no device or driver is present.
TT_API int cuda_device_count();

// The device memory is actually placed on: cpu() for any CPU device, cuda(-1) as the current CUDA
// device. NotSupported when no CUDA device is usable; InvalidArgument for an index that does not exist.
TT_API Device resolve_device(Device device);

// What this build of the library includes ("cuda=yes nccl=yes mpi=yes ucx=yes").
TT_API std::string build_features();

}  // namespace tensortree
