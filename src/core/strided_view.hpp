// A plain description of a strided block of elements, shared by the CPU copy loop and the CUDA
// kernels (so it must stay a trivially copyable struct with no library types inside).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensortree::detail {

inline constexpr int kMaxDims = 16;

struct StridedView {
  std::byte* data = nullptr;  // address of element 0
  int ndim = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};  // in elements
};

}  // namespace tensortree::detail
