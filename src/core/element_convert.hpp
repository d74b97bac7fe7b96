// Converting single elements between their storage type and double / complex<double>.
#pragma once

#include <complex>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/text_format.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"

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
