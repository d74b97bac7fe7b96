// The element-wise operations of tensor_arith.cpp as plain functions of one compute type, shared by
// the CPU loops and the CUDA kernels (so: no library types, nothing that nvcc's device side lacks).
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#ifdef __CUDACC__
#define TT_HOST_DEVICE __host__ __device__
#else
#define TT_HOST_DEVICE
#endif

namespace tensortree::detail {

enum class BinaryOp : std::uint8_t { Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge };
// Clamp's bounds come as two scalars; a missing one is passed as -inf / +inf.
enum class UnaryOp : std::uint8_t { Neg, Abs, Sqrt, Exp, Log, Clamp };

TT_HOST_DEVICE constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

template <class T>
inline constexpr bool is_complex_value = false;
template <class T>
inline constexpr bool is_complex_value<std::complex<T>> = true;
template <class C>
inline constexpr bool is_inexact = std::is_floating_point_v<C> || is_complex_value<C>;

// fn(std::integral_constant<BinaryOp, op>): the operation as a template argument.
template <class Fn>
void with_op(BinaryOp op, const Fn& fn) {
  switch (op) {
#define TT_OP_CASE(O) \
  case BinaryOp::O: return fn(std::integral_constant<BinaryOp, BinaryOp::O>{});
    TT_OP_CASE(Add)
    TT_OP_CASE(Sub)
    TT_OP_CASE(Mul)
    TT_OP_CASE(Div)
    TT_OP_CASE(Eq)
    TT_OP_CASE(Ne)
    TT_OP_CASE(Lt)
    TT_OP_CASE(Le)
    TT_OP_CASE(Gt)
    TT_OP_CASE(Ge)
#undef TT_OP_CASE
  }
}

// Which (operation, compute type) pairs have a loop: division computes in floating and complex
// types only, bool has no subtraction, complex numbers no order. The callers refuse the others
// before any loop runs.
template <BinaryOp Op, class C>
constexpr bool has_loop() {
  if constexpr (Op == BinaryOp::Div) return is_inexact<C>;
  if constexpr (Op == BinaryOp::Sub) return !std::is_same_v<C, bool>;
  if constexpr (is_comparison(Op) && Op != BinaryOp::Eq && Op != BinaryOp::Ne) return !is_complex_value<C>;
  return true;
}

// Integers compute in an unsigned type at least as wide as int: wrapping is then defined (no signed
// overflow, no promotion of uint16 * uint16 to a signed int that overflows).
template <class C>
using wrapping_t = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;

template <BinaryOp Op, class C>
TT_HOST_DEVICE inline C arithmetic(C x, C y) {
  if constexpr (std::is_same_v<C, bool>) {
    // Sub is refused before any loop runs; Div never sees bool (it computes in float32).
    if constexpr (Op == BinaryOp::Mul) {
      return x && y;
    } else {
      return x || y;
    }
  } else if constexpr (std::is_integral_v<C>) {
    using W = wrapping_t<C>;
    const W a = static_cast<W>(x);
    const W b = static_cast<W>(y);
    if constexpr (Op == BinaryOp::Add) {
      return static_cast<C>(a + b);
    } else if constexpr (Op == BinaryOp::Sub) {
      return static_cast<C>(a - b);
    } else {
      return static_cast<C>(a * b);
    }
  } else if constexpr (Op == BinaryOp::Add) {
    return x + y;
  } else if constexpr (Op == BinaryOp::Sub) {
    return x - y;
  } else if constexpr (Op == BinaryOp::Mul) {
    return x * y;
  } else {
    return x / y;
  }
}

template <BinaryOp Op, class C>
TT_HOST_DEVICE inline bool compare(C x, C y) {
  if constexpr (Op == BinaryOp::Eq) {
    return x == y;
  } else if constexpr (Op == BinaryOp::Ne) {
    return x != y;
  } else if constexpr (Op == BinaryOp::Lt) {
    return x < y;
  } else if constexpr (Op == BinaryOp::Le) {
    return x <= y;
  } else if constexpr (Op == BinaryOp::Gt) {
    return x > y;
  } else {
    return x >= y;
  }
}

// min(max(x, lo), hi) that keeps NaN (a comparison with NaN is false, so x passes through).
template <class C>
TT_HOST_DEVICE inline C clamp_value(C x, C lo, C hi) {
  const C raised = x < lo ? lo : x;
  return raised > hi ? hi : raised;
}

// A floating value truncated toward zero into integer type I. C++ leaves an out-of-range conversion
// undefined (PyTorch leaves it to the hardware); here values within 64 bits wrap as a cast through
// int64/uint64 does, and NaN and anything larger give 0.
template <class I, class F>
TT_HOST_DEVICE inline I float_to_integer(F v) {
  const double d = static_cast<double>(v);
  if (d >= -0x1p63 && d < 0x1p63) return static_cast<I>(static_cast<std::int64_t>(d));
  if (d >= 0x1p63 && d < 0x1p64) return static_cast<I>(static_cast<std::uint64_t>(d));
  return I{0};
}

// One real compute value (bool, integer, float, double) as another, as tensor.to(dtype) converts:
// anything to bool tests for non-zero, floating to integer truncates.
template <class To, class From>
TT_HOST_DEVICE inline To convert_real(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return float_to_integer<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace tensortree::detail
