#include "comm/combine.hpp"

#include <cmath>
#include <complex>
#include <string>
#include <type_traits>

#include "core/element_convert.hpp"
#include "comm/reduction_rules.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// The type arithmetic happens in: unsigned for integers (wrapping is defined there), at least
// unsigned int (narrower unsigned types promote to int, whose products overflow), float for the
// 16- and 8-bit floats, the type itself otherwise.
template <class T>
auto widened(T value) {
  if constexpr (std::is_integral_v<T>) {
    using Unsigned = std::make_unsigned_t<T>;
    return static_cast<std::conditional_t<(sizeof(Unsigned) < sizeof(unsigned)), unsigned, Unsigned>>(value);
  } else if constexpr (std::is_floating_point_v<T> || is_std_complex<T>) {
    return value;
  } else {
    return static_cast<float>(value);
  }
}

// MIN or MAX; NaN wins (torch.minimum / torch.maximum).
template <class V>
V picked(V a, V b, bool minimum) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return minimum ? (b < a ? b : a) : (a < b ? b : a);
}

template <class T>
T combined(T a, T b, ReduceOp op) {
  const auto x = widened(a);
  const auto y = widened(b);
  using W = decltype(x);
  switch (op) {
    case ReduceOp::Sum: return static_cast<T>(static_cast<W>(x + y));
    case ReduceOp::Product: return static_cast<T>(static_cast<W>(x * y));
    case ReduceOp::Min:
    case ReduceOp::Max:
      if constexpr (std::is_integral_v<T>) {
        return picked(a, b, op == ReduceOp::Min);  // compared as signed where T is
      } else if constexpr (!is_std_complex<T>) {
        return static_cast<T>(picked(x, y, op == ReduceOp::Min));
      }
      break;
    case ReduceOp::BitwiseAnd:
    case ReduceOp::BitwiseOr:
    case ReduceOp::BitwiseXor:
      if constexpr (std::is_integral_v<T>) {
        if (op == ReduceOp::BitwiseAnd) return static_cast<T>(x & y);
        if (op == ReduceOp::BitwiseOr) return static_cast<T>(x | y);
        return static_cast<T>(x ^ y);
      }
      break;
    case ReduceOp::Avg: break;
  }
  throw NotSupported(fmt::format("combine_into: no {} for {}", reduce_op_name(op), dtype_v<T>));
}

bool logical(bool a, bool b, LogicalReduction reduction) {
  switch (reduction) {
    case LogicalReduction::Any: return a || b;
    case LogicalReduction::All: return a && b;
    case LogicalReduction::Parity: return a != b;
  }
  return a;
}

void check_operands(const Tensor& accumulated, const Tensor& incoming) {
  const auto describe = [](const Tensor& t) {
    return fmt::format("{} of {} elements on {}", t.dtype(), t.numel(), t.device());
  };
  const bool usable = accumulated.defined() && incoming.defined() && accumulated.device().is_cpu() &&
                      incoming.device().is_cpu() && accumulated.is_contiguous() && incoming.is_contiguous();
  if (!usable || accumulated.dtype() != incoming.dtype() || accumulated.numel() != incoming.numel()) {
    throw InvalidArgument(
        fmt::format("combine_into needs two contiguous host tensors of one dtype and length, got {} and {}",
                    accumulated.defined() ? describe(accumulated) : std::string("an undefined tensor"),
                    incoming.defined() ? describe(incoming) : std::string("an undefined tensor")));
  }
}

}  // namespace

void combine_into(const Tensor& accumulated, const Tensor& incoming, ReduceOp op) {
  check_operands(accumulated, incoming);
  if (const std::string refusal = reduction_refusal(accumulated.dtype(), op); !refusal.empty()) {
    throw NotSupported(fmt::format("combine_into cannot reduce {} with {}: {}", accumulated.dtype(), reduce_op_name(op),
                                   refusal));
  }
  const ReduceOp combine = combining_op(op);
  const std::int64_t count = accumulated.numel();
  visit_dtype(accumulated.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(accumulated.data_ptr());
    const T* in = static_cast<const T*>(incoming.data_ptr());
    if constexpr (std::is_same_v<T, bool>) {
      const LogicalReduction reduction = logical_reduction(combine);
      for (std::int64_t i = 0; i < count; ++i) out[i] = logical(out[i], in[i], reduction);
    } else {
      for (std::int64_t i = 0; i < count; ++i) out[i] = combined(out[i], in[i], combine);
    }
  });
}

}  // namespace tensortree::detail
