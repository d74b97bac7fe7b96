// How a reduction combines the values of every rank.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

#include "tensortree/export.hpp"

namespace tensortree {

enum class ReduceOp : std::uint8_t {
  Sum,
  Product,
  Min,
  Max,
  Avg,         // Sum divided by the group size (integer division for integer dtypes)
  BitwiseAnd,  // integer and bool tensors only
  BitwiseOr,
  BitwiseXor,
};

// "SUM", "PRODUCT", ... as torch.distributed.ReduceOp names them.
TT_API std::string_view reduce_op_name(ReduceOp op);
TT_API std::ostream& operator<<(std::ostream& os, ReduceOp op);

}  // namespace tensortree
