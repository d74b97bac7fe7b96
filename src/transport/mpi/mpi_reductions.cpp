#include "transport/mpi/mpi_reductions.hpp"

#include <cmath>
#include <string>

#include "core/element_convert.hpp"
#include "comm/reduction_rules.hpp"
#include "core/text_format.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "transport/mpi/mpi_datatypes.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

bool is_widened(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float8_e4m3fn ||
         dtype == DType::Float8_e5m2;
}

// ---- reductions MPI lacks: widen to float, combine, narrow -----------------------------------------

struct Add {
  float operator()(float a, float b) const { return a + b; }
};
struct Multiply {
  float operator()(float a, float b) const { return a * b; }
};
// NaN wins, as in torch.minimum / torch.maximum.
struct Minimum {
  float operator()(float a, float b) const { return std::isnan(a) || a < b ? a : b; }
};
struct Maximum {
  float operator()(float a, float b) const { return std::isnan(a) || a > b ? a : b; }
};

template <class T, class Combine>
void combine_widened(void* incoming, void* accumulated, int* length, MPI_Datatype*) {
  const T* in = static_cast<const T*>(incoming);
  T* inout = static_cast<T*>(accumulated);
  for (int i = 0; i < *length; ++i) {
    inout[i] = T(Combine{}(static_cast<float>(in[i]), static_cast<float>(inout[i])));
  }
}

template <class T>
MPI_User_function* widened_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &combine_widened<T, Add>;
    case ReduceOp::Product: return &combine_widened<T, Multiply>;
    case ReduceOp::Min: return &combine_widened<T, Minimum>;
    case ReduceOp::Max: return &combine_widened<T, Maximum>;
    default: break;
  }
  throw InvalidArgument(fmt::format("no widened reduction for {}", reduce_op_name(op)));
}

MPI_User_function* widened_function(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::Float16: return widened_function<Half>(op);
    case DType::BFloat16: return widened_function<BFloat16>(op);
    case DType::Float8_e4m3fn: return widened_function<Float8E4M3FN>(op);
    case DType::Float8_e5m2: return widened_function<Float8E5M2>(op);
    default: break;
  }
  throw InvalidArgument(fmt::format("no widened reduction for {}", dtype));
}

// Bool tensors reduce logically (comm/reduction_rules.hpp).
MPI_Op logical_op(ReduceOp op) {
  switch (logical_reduction(op)) {
    case LogicalReduction::Any: return MPI_LOR;
    case LogicalReduction::All: return MPI_LAND;
    case LogicalReduction::Parity: return MPI_LXOR;
  }
  throw InvalidArgument(fmt::format("no logical reduction for {}", reduce_op_name(op)));
}

MPI_Op predefined_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Product: return MPI_PROD;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::BitwiseAnd: return MPI_BAND;
    case ReduceOp::BitwiseOr: return MPI_BOR;
    case ReduceOp::BitwiseXor: return MPI_BXOR;
    case ReduceOp::Avg: break;
  }
  throw InvalidArgument(fmt::format("no MPI operation for {}", reduce_op_name(op)));
}

}  // namespace

MpiReduction MpiReductions::resolve(DType dtype, ReduceOp op, int rank) {
  if (const std::string reason = reduction_refusal(dtype, op); !reason.empty()) {
    throw NotSupported(fmt::format("mpi backend on rank {} cannot reduce {} tensors with {}: {}", rank, dtype,
                                   reduce_op_name(op), reason));
  }
  const bool average = op == ReduceOp::Avg;
  const ReduceOp combine = combining_op(op);
  if (dtype == DType::Bool) return {MPI_C_BOOL, logical_op(combine), false};
  if (is_widened(dtype)) return {element_datatype(dtype), widened_op(dtype, combine), average};
  return {element_datatype(dtype), predefined_op(combine), average};
}

MPI_Op MpiReductions::widened_op(DType dtype, ReduceOp op) {
  const std::lock_guard lock(mutex_);
  auto found = widened_ops_.find({dtype, op});
  if (found == widened_ops_.end()) {
    MPI_Op raw = MPI_OP_NULL;
    TT_MPI_CHECK(MPI_Op_create(widened_function(dtype, op), 1, &raw));
    found = widened_ops_.emplace(std::pair{dtype, op}, MpiOp(raw)).first;
  }
  return found->second.get();
}

}  // namespace tensortree::detail
