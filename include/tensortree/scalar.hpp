// Scalar: the number operand of element-wise arithmetic and comparisons (tensor + 2, tree * 0.5),
// integer or floating as the C++ value was, so that PyTorch's rules for Python's int and float
// scalars apply: an integer keeps an integer tensor's dtype (int32 + 2 is int32; bool + 2 is int64)
// and is converted to it as PyTorch converts, wrapping (uint8 250 + 300 is 38); a floating value
// turns a bool or integer tensor into float32, PyTorch's default dtype (int32 + 2.5 is float32).
// A floating or complex tensor keeps its dtype with either. bool counts as the integer 0 or 1; an
// unsigned integer beyond int64 is taken modulo 2^64, as integer arithmetic wraps anyway.
#pragma once

#include <concepts>
#include <cstdint>

namespace tensortree {

class Scalar {
 public:
  template <std::integral T>
  constexpr Scalar(T value) : integer_(static_cast<std::int64_t>(value)), integral_(true) {}  // NOLINT: implicit
  template <std::floating_point T>
  constexpr Scalar(T value) : floating_(static_cast<double>(value)) {}  // NOLINT: implicit

  constexpr bool is_integral() const { return integral_; }
  // The integer (integral scalars only; a floating one truncated toward zero).
  constexpr std::int64_t to_int64() const { return integral_ ? integer_ : static_cast<std::int64_t>(floating_); }
  constexpr double to_double() const { return integral_ ? static_cast<double>(integer_) : floating_; }

 private:
  std::int64_t integer_ = 0;
  double floating_ = 0.0;
  bool integral_ = false;
};

}  // namespace tensortree
