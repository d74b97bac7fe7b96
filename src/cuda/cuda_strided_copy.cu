// One kernel launch copies every element of a strided view into another of the same shape.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_api.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "cuda/cuda_messages.hpp"
#include "cuda/stream_order.hpp"

namespace tensortree::cuda {

namespace {

struct alignas(16) Bytes16 {
  std::uint64_t lo, hi;
};

template <class Word>
__global__ void strided_copy_kernel(detail::StridedView dst, detail::StridedView src,
                                    std::int64_t numel) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < numel;
       i += stride) {
    std::int64_t rest = i;
    std::int64_t src_offset = 0;
    std::int64_t dst_offset = 0;
    for (int d = src.ndim - 1; d >= 0; --d) {
      const std::int64_t coord = rest % src.shape[d];
      rest /= src.shape[d];
      src_offset += coord * src.strides[d];
      dst_offset += coord * dst.strides[d];
    }
    reinterpret_cast<Word*>(dst.data)[dst_offset] = reinterpret_cast<const Word*>(src.data)[src_offset];
  }
}

template <class Word>
void launch(const detail::StridedView& dst, const detail::StridedView& src, std::int64_t numel) {
  constexpr int kThreads = 256;
  const std::int64_t blocks = (numel + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 ? blocks : 65535);
  strided_copy_kernel<Word><<<grid, kThreads>>>(dst, src, numel);
}

}  // namespace

void copy_strided(const detail::StridedView& dst, const detail::StridedView& src,
                  std::size_t itemsize, int device) {
  std::int64_t numel = 1;
  for (int d = 0; d < src.ndim; ++d) numel *= src.shape[d];
  if (numel == 0) return;
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  switch (itemsize) {
    case 1: launch<std::uint8_t>(dst, src, numel); break;
    case 2: launch<std::uint16_t>(dst, src, numel); break;
    case 4: launch<std::uint32_t>(dst, src, numel); break;
    case 8: launch<std::uint64_t>(dst, src, numel); break;
    case 16: launch<Bytes16>(dst, src, numel); break;
    default:
      throw_unsupported_element_size(itemsize);
  }
  TT_CUDA_CHECK(cudaGetLastError());
  TT_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace tensortree::cuda
