#include "tensortree/reduce_op.hpp"

#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "SUM";
    case ReduceOp::Product: return "PRODUCT";
    case ReduceOp::Min: return "MIN";
    case ReduceOp::Max: return "MAX";
    case ReduceOp::Avg: return "AVG";
    case ReduceOp::BitwiseAnd: return "BAND";
    case ReduceOp::BitwiseOr: return "BOR";
    case ReduceOp::BitwiseXor: return "BXOR";
  }
  throw InvalidArgument(fmt::format("unknown ReduceOp {}", static_cast<int>(op)));
}

std::ostream& operator<<(std::ostream& os, ReduceOp op) { return os << reduce_op_name(op); }

}  // namespace tensortree
