#include "transport/nccl/nccl_reductions.hpp"

#include <optional>
#include <string>
#include <string_view>

#include "comm/reduction_rules.hpp"
#include "core/text_format.hpp"
#include "transport/nccl/nccl_check.hpp"
#include "tensortree/device.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

[[noreturn]] void cannot_reduce(DType dtype, ReduceOp op, std::string_view why) {
  throw NotSupported(fmt::format("nccl does not support {} on {} tensors: {}", op, dtype, why));
}

// The NCCL type that computes on `dtype`'s values, where NCCL has one.
std::optional<ncclDataType_t> arithmetic_type(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::UInt32: return ncclUint32;
    case DType::Int32: return ncclInt32;
    case DType::UInt64: return ncclUint64;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
#if TT_NCCL_HAS_BFLOAT16
    case DType::BFloat16: return ncclBfloat16;
#endif
#if TT_NCCL_HAS_FLOAT8
    case DType::Float8_e4m3fn: return ncclFloat8e4m3;
    case DType::Float8_e5m2: return ncclFloat8e5m2;
#endif
    default: return std::nullopt;
  }
}

// SUM, PRODUCT, MIN, MAX or AVG on NCCL elements of `type`.
NcclReduction arithmetic_reduction(ncclDataType_t type, std::size_t lanes, DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return {type, lanes, ncclSum};
    case ReduceOp::Product: return {type, lanes, ncclProd};
    case ReduceOp::Min: return {type, lanes, ncclMin};
    case ReduceOp::Max: return {type, lanes, ncclMax};
    case ReduceOp::Avg:
#if TT_NCCL_HAS_AVG
      return {type, lanes, ncclAvg};
#else
      return {type, lanes, ncclSum, true};
#endif
    case ReduceOp::BitwiseAnd:
    case ReduceOp::BitwiseOr:
    case ReduceOp::BitwiseXor: break;
  }
  cannot_reduce(dtype, op, "NCCL has no such reduction");
}

// Bools are bytes holding 0 or 1, and a byte sum could leave 2: "any" is MAX and "all" MIN, as
// PyTorch's NCCL backend does.
NcclReduction bool_reduction(ReduceOp op) {
  switch (logical_reduction(op)) {
    case LogicalReduction::Any: return {ncclUint8, 1, ncclMax};
    case LogicalReduction::All: return {ncclUint8, 1, ncclMin};
    case LogicalReduction::Parity: break;
  }
  cannot_reduce(DType::Bool, op, "NCCL has no such reduction");
}

// Through a host copy: only NCCL before 2.10 needs it, which does not deserve a kernel.
void divide_through_host(const Tensor& tensor, int divisor) {
  const Tensor host = tensor.to(Device::cpu());
  divide_in_place(host, divisor);
  tensor.copy_(host);
}

}  // namespace

NcclReduction reduction_for(DType dtype, ReduceOp op) {
  if (const std::string reason = reduction_refusal(dtype, op); !reason.empty()) cannot_reduce(dtype, op, reason);
  if (is_bitwise(op)) cannot_reduce(dtype, op, "NCCL has no bitwise reductions");
  if (dtype == DType::Bool) return bool_reduction(op);
  if (is_complex(dtype)) {
    // Sums and means are component-wise; NCCL knows no complex product.
    if (op == ReduceOp::Product) cannot_reduce(dtype, op, "NCCL has no complex product");
    return arithmetic_reduction(dtype == DType::Complex64 ? ncclFloat32 : ncclFloat64, 2, dtype, op);
  }
  if ((dtype == DType::Float8_e4m3fn || dtype == DType::Float8_e5m2) && op == ReduceOp::Avg) {
    // NCCL 2.28 rejects ncclAvg on its float8 types (ncclInvalidArgument). Summing and dividing
    // instead could leave the type's narrow range before the division, so it is refused here,
    // before anything is queued.
    cannot_reduce(dtype, op, "NCCL has no float8 average");
  }
  const std::optional<ncclDataType_t> type = arithmetic_type(dtype);
  if (!type) {
    cannot_reduce(dtype, op, fmt::format("NCCL {}.{}.{} has no arithmetic on this element type", NCCL_MAJOR, NCCL_MINOR,
                                         NCCL_PATCH));
  }
  return arithmetic_reduction(*type, 1, dtype, op);
}

std::size_t count_of(const Tensor& tensor, const NcclReduction& reduction) {
  return static_cast<std::size_t>(tensor.numel()) * reduction.lanes;
}

std::function<void()> divide_after(const NcclReduction& reduction, const Tensor& tensor, int divisor) {
  if (!reduction.divide_after) return nullptr;
  return [tensor, divisor] { divide_through_host(tensor, divisor); };
}

}  // namespace tensortree::detail
