// Copies between strided views: the CPU loop here, the CUDA kernel behind cuda_api.hpp.
#pragma once

#include <cstddef>

#include "core/strided_view.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// The view's description; InvalidArgument beyond kMaxDims dimensions.
StridedView strided_view_of(const Tensor& tensor);

// Copies src into dst (same shape, same itemsize). Dimensions that are contiguous in both views
// are merged first, so a copy between two dense layouts is one memcpy and a strided one copies
// whole inner runs at a time.
void copy_strided_cpu(const StridedView& dst, const StridedView& src, std::size_t itemsize);

}  // namespace tensortree::detail
