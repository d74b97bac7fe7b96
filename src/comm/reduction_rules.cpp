#include "comm/reduction_rules.hpp"

#include <cstdint>
#include <type_traits>

#include "core/element_convert.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

template <class T>
T divided(T value, int divisor) {
  if constexpr (is_std_complex<T>) {
    return value / static_cast<typename T::value_type>(divisor);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return static_cast<T>(static_cast<std::int64_t>(value) / divisor);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::uint64_t>(value) / static_cast<std::uint64_t>(divisor));
  } else if constexpr (std::is_floating_point_v<T>) {
    return value / static_cast<T>(divisor);
  } else {
    return T(static_cast<float>(value) / static_cast<float>(divisor));  // Half, BFloat16, Float8*
  }
}

}  // namespace

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor;
}

std::string reduction_refusal(DType dtype, ReduceOp op) {
  if (is_bitwise(op) && !is_integral(dtype) && dtype != DType::Bool) {
    return "bitwise operations need integer or bool tensors";
  }
  if (is_complex(dtype) && (op == ReduceOp::Min || op == ReduceOp::Max)) return "complex numbers have no order";
  if (dtype == DType::Bool && op == ReduceOp::Avg) return "a bool tensor has no average";
  return {};
}

LogicalReduction logical_reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::BitwiseOr: return LogicalReduction::Any;
    case ReduceOp::Product:
    case ReduceOp::Min:
    case ReduceOp::BitwiseAnd: return LogicalReduction::All;
    case ReduceOp::BitwiseXor: return LogicalReduction::Parity;
    case ReduceOp::Avg: break;
  }
  throw InvalidArgument(fmt::format("no logical reduction for {}", reduce_op_name(op)));
}

ReduceOp combining_op(ReduceOp op) { return op == ReduceOp::Avg ? ReduceOp::Sum : op; }

void divide_in_place(const Tensor& host, int divisor) {
  visit_dtype(host.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw NotSupported("a bool tensor has no average");
    } else {
      T* values = static_cast<T*>(host.data_ptr());
      const std::int64_t count = host.numel();
      for (std::int64_t i = 0; i < count; ++i) values[i] = divided(values[i], divisor);
    }
  });
}

}  // namespace tensortree::detail
