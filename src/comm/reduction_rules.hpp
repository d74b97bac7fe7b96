// The reduction rules every backend follows, written once so that two backends cannot disagree:
// which dtypes an operation accepts, what a reduction of bool tensors means, and how AVG is
// computed (SUM, then a division by the group size once the sum is complete). A backend adds
// only what its library lacks (NCCL: bitwise operations, some element types).
#pragma once

#include <string>

#include "tensortree/dtype.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

bool is_bitwise(ReduceOp op);

// Why no backend reduces `dtype` tensors with `op`, or empty when the rules allow it.
std::string reduction_refusal(DType dtype, ReduceOp op);

// What a reduction of bool tensors computes, as in PyTorch: any (SUM, MAX, BOR), all (PRODUCT,
// MIN, BAND) or parity (BXOR).
enum class LogicalReduction { Any, All, Parity };
// InvalidArgument for AVG, which reduction_refusal refuses on bool.
LogicalReduction logical_reduction(ReduceOp op);

// The operation that combines the ranks' values: SUM for AVG, `op` itself otherwise.
ReduceOp combining_op(ReduceOp op);

// AVG's last step on a contiguous host tensor holding the sum: integers divide with truncation
// toward zero, floating-point and complex values divide, 16- and 8-bit floats through float.
void divide_in_place(const Tensor& host, int divisor);

}  // namespace tensortree::detail
