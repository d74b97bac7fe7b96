// How NCCL reduces each dtype with each ReduceOp, following the shared rules of
// comm/reduction_rules.hpp, plus what NCCL lacks: bitwise operations, a complex product, and
// arithmetic on the element types this NCCL does not know.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <functional>

#include "tensortree/dtype.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// How a reduction is handed to NCCL.
struct NcclReduction {
  ncclDataType_t type;
  std::size_t lanes;  // NCCL elements per tensor element: 2 for complex (real, imaginary)
  ncclRedOp_t op;
  bool divide_after = false;  // AVG as SUM, divided once complete (NCCL before ncclAvg)
};

// NotSupported naming the dtype, the op and why, for a combination NCCL cannot reduce.
NcclReduction reduction_for(DType dtype, ReduceOp op);

// NCCL elements of `tensor` for `reduction`.
std::size_t count_of(const Tensor& tensor, const NcclReduction& reduction);

// The step that completes an AVG NCCL computed as SUM (dividing `tensor`, on its device, by
// `divisor`), or nullptr when there is none.
std::function<void()> divide_after(const NcclReduction& reduction, const Tensor& tensor, int divisor);

}  // namespace tensortree::detail
