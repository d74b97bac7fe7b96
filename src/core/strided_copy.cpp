#include "core/strided_copy.hpp"

#include <cstring>
#include <string>

#include "core/text_format.hpp"

namespace tensortree::detail {

StridedView strided_view_of(const Tensor& tensor) {
  if (tensor.dim() > kMaxDims) {
    throw InvalidArgument(fmt::format("tensors of more than {} dimensions are not supported (got {})", kMaxDims,
                                      tensor.dim()));
  }
  StridedView view;
  view.data = static_cast<std::byte*>(tensor.data_ptr());
  view.ndim = static_cast<int>(tensor.dim());
  for (int d = 0; d < view.ndim; ++d) {
    view.shape[d] = tensor.shape()[d];
    view.strides[d] = tensor.strides()[d];
  }
  return view;
}

namespace {

// Drops size-1 dimensions and merges neighbours that are contiguous in both views.
void coalesce(StridedView& dst, StridedView& src) {
  int out = 0;
  for (int d = 0; d < src.ndim; ++d) {
    if (src.shape[d] == 1) continue;
    if (out > 0 && src.strides[out - 1] == src.strides[d] * src.shape[d] &&
        dst.strides[out - 1] == dst.strides[d] * src.shape[d]) {
      src.shape[out - 1] *= src.shape[d];
      src.strides[out - 1] = src.strides[d];
      dst.strides[out - 1] = dst.strides[d];
      continue;
    }
    src.shape[out] = src.shape[d];
    src.strides[out] = src.strides[d];
    dst.strides[out] = dst.strides[d];
    ++out;
  }
  src.ndim = out;
  dst.ndim = out;
  for (int d = 0; d < out; ++d) dst.shape[d] = src.shape[d];
}

template <std::size_t kSize>
void copy_elements(std::byte* dst, std::int64_t dst_stride, const std::byte* src,
                   std::int64_t src_stride, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    std::memmove(dst + i * dst_stride * kSize, src + i * src_stride * kSize, kSize);
  }
}

void copy_run(std::byte* dst, std::int64_t dst_stride, const std::byte* src, std::int64_t src_stride,
              std::int64_t count, std::size_t itemsize) {
  if (dst_stride == 1 && src_stride == 1) {
    std::memmove(dst, src, static_cast<std::size_t>(count) * itemsize);  // x.copy_(x) is legal
    return;
  }
  switch (itemsize) {
    case 1: return copy_elements<1>(dst, dst_stride, src, src_stride, count);
    case 2: return copy_elements<2>(dst, dst_stride, src, src_stride, count);
    case 4: return copy_elements<4>(dst, dst_stride, src, src_stride, count);
    case 8: return copy_elements<8>(dst, dst_stride, src, src_stride, count);
    case 16: return copy_elements<16>(dst, dst_stride, src, src_stride, count);
    default: throw InvalidArgument(fmt::format("unsupported element size {}", itemsize));
  }
}

}  // namespace

void copy_strided_cpu(const StridedView& dst_in, const StridedView& src_in, std::size_t itemsize) {
  StridedView dst = dst_in;
  StridedView src = src_in;
  for (int d = 0; d < src.ndim; ++d) {
    if (src.shape[d] == 0) return;
  }
  coalesce(dst, src);
  if (src.ndim == 0) {
    std::memmove(dst.data, src.data, itemsize);
    return;
  }
  const int inner = src.ndim - 1;
  std::int64_t counter[kMaxDims] = {};
  const auto isize = static_cast<std::int64_t>(itemsize);
  while (true) {
    std::int64_t src_offset = 0;
    std::int64_t dst_offset = 0;
    for (int d = 0; d < inner; ++d) {
      src_offset += counter[d] * src.strides[d];
      dst_offset += counter[d] * dst.strides[d];
    }
    copy_run(dst.data + dst_offset * isize, dst.strides[inner], src.data + src_offset * isize,
             src.strides[inner], src.shape[inner], itemsize);
    int d = inner - 1;
    for (; d >= 0; --d) {
      if (++counter[d] < src.shape[d]) break;
      counter[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace tensortree::detail
