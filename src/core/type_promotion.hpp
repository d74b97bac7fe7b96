// The result dtypes of element-wise operations, beyond promote_types (dtype.hpp): with a double
// scalar, and of true division. One table for the CPU loops and the CUDA kernels.
#pragma once

#include "tensortree/dtype.hpp"

namespace tensortree::detail {

// A double scalar with a tensor of `dtype`: bool and integer tensors compute in float32 (PyTorch's
// default dtype), floating and complex ones keep their dtype.
DType promote_with_scalar(DType dtype);
// Division and the floating functions (sqrt, exp, log) turn bool and integer inputs into float32.
DType floating_result(DType dtype);

// Whether the CUDA element-wise kernels compute `dtype` (bool, integers, float16, bfloat16, float32,
// float64); complex and float8 tensors on a GPU are computed in host memory instead.
bool kernel_computes(DType dtype);

}  // namespace tensortree::detail
