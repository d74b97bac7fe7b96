// Converting single elements between their storage type and double / complex<double>.
#pragma once

#include <complex>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/text_format.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"
#include "tensortree/float_types.hpp"

namespace tensortree::detail {

template <class T> inline constexpr bool is_std_complex = false;
template <class T> inline constexpr bool is_std_complex<std::complex<T>> = true;

// Truncates toward zero, then wraps modulo 2^bits as a two's-complement cast does (-1 fills a
// uint8 with 255, as in PyTorch). A direct cast of an out-of-range double is undefined behaviour,
// so the value goes through the 64-bit integer that holds it; beyond 64 bits it is rejected.
template <class T>
T integer_from_double(double v) {
  if (v >= 0x1p63 && v < 0x1p64) return static_cast<T>(static_cast<std::uint64_t>(v));
  if (v >= -0x1p63 && v < 0x1p63) return static_cast<T>(static_cast<std::int64_t>(v));
  throw InvalidArgument(fmt::format("value {:f} cannot be converted to {}", v, dtype_v<T>));
}

template <class T>
T element_from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (is_std_complex<T>) {
    return T(static_cast<typename T::value_type>(v), 0);
  } else if constexpr (std::is_integral_v<T>) {
    return integer_from_double<T>(v);
  } else if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(v);
  } else {
    return T(static_cast<float>(v));  // Half, BFloat16, Float8*
  }
}

// The largest finite value of a floating element type.
template <class T>
constexpr double largest_finite() {
  if constexpr (std::is_same_v<T, Half>) {
    return 65504.0;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return 0x1.fep127;
  } else if constexpr (std::is_same_v<T, Float8E4M3FN>) {
    return 448.0;
  } else if constexpr (std::is_same_v<T, Float8E5M2>) {
    return 57344.0;
  } else {
    return static_cast<double>(std::numeric_limits<T>::max());
  }
}

// Whether a scalar `v` fits T as PyTorch's checked conversion of a scalar argument decides
// (fill_, full): integers must lie within T's range, except that an unsigned type takes a negative
// value down to -max, wrapping (uint8 takes -1 as 255); floating types take any finite value up to
// their largest, and infinities and NaN. bool takes anything.
template <class T>
bool scalar_fits(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return true;
  } else if constexpr (is_std_complex<T>) {
    return scalar_fits<typename T::value_type>(v);
  } else if constexpr (std::is_integral_v<T>) {
    const double max = static_cast<double>(std::numeric_limits<T>::max());
    const double lowest = std::is_signed_v<T> ? static_cast<double>(std::numeric_limits<T>::lowest()) : -max;
    return v >= lowest && v <= max;
  } else {
    return !std::isfinite(v) || std::fabs(v) <= largest_finite<T>();
  }
}

// `v` as an element of T, InvalidArgument naming `op` where it does not fit (scalar_fits).
template <class T>
T scalar_to_element(double v, std::string_view op) {
  if (!scalar_fits<T>(v)) {
    throw InvalidArgument(fmt::format("{}: value {} cannot be converted to {} without overflow", op, v, dtype_v<T>));
  }
  return element_from_double<T>(v);
}

// Reads one element at `p` (any alignment). Bools are read as bytes: any non-zero byte is true.
template <class T>
std::complex<double> load_element(const std::byte* p) {
  if constexpr (std::is_same_v<T, bool>) {
    std::uint8_t raw;
    std::memcpy(&raw, p, 1);
    return raw != 0 ? 1.0 : 0.0;
  } else {
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (is_std_complex<T>) {
      return {static_cast<double>(v.real()), static_cast<double>(v.imag())};
    } else if constexpr (std::is_arithmetic_v<T>) {
      return static_cast<double>(v);
    } else {
      return static_cast<double>(static_cast<float>(v));
    }
  }
}

inline std::complex<double> load_element(DType dtype, const std::byte* p) {
  return visit_dtype(dtype, [p](auto tag) { return load_element<decltype(tag)>(p); });
}

}  // namespace tensortree::detail
