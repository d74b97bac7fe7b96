// combine_into: the elementwise step of every reduction a backend computes itself (collectives
// built over pairs): `accumulated[i] = accumulated[i] (op) incoming[i]`, for every dtype the
// reduction rules (comm/reduction_rules.hpp) allow. AVG combines as SUM; its division is the
// caller's last step (divide_in_place), once every rank's values are in.
#pragma once

#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// Both tensors contiguous, on the host, of one dtype and element count (InvalidArgument
// otherwise, naming both); NotSupported where the rules refuse `op` on that dtype. Bool tensors
// reduce logically (any, all, parity); 16- and 8-bit floats through float, as MPI's widened
// operations do; MIN and MAX let NaN win, as torch.minimum and torch.maximum do; integers wrap.
void combine_into(const Tensor& accumulated, const Tensor& incoming, ReduceOp op);

}  // namespace tensortree::detail
