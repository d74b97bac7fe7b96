// How each element type is stored and computed in the element-wise loops: bool as a byte (any
// non-zero byte is true, as everywhere in the library), float16 / bfloat16 / float8 computed in
// float, everything else as itself.
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "core/element_convert.hpp"
#include "core/elementwise.hpp"
#include "tensortree/float_types.hpp"

namespace tensortree::detail {

template <class T>
inline constexpr bool is_reduced_float = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
                                         std::is_same_v<T, Float8E4M3FN> || std::is_same_v<T, Float8E5M2>;

template <class T>
struct ElementType {
  using storage = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;
  using compute = std::conditional_t<is_reduced_float<T>, float, T>;

  static compute load(storage v) {
    if constexpr (std::is_same_v<T, bool>) {
      return v != 0;
    } else if constexpr (is_reduced_float<T>) {
      return static_cast<float>(v);
    } else {
      return v;
    }
  }
  static storage store(compute c) {
    if constexpr (std::is_same_v<T, bool>) {
      return c ? 1 : 0;
    } else if constexpr (is_reduced_float<T>) {
      return T(c);
    } else {
      return c;
    }
  }
};

// One compute value as another compute type, as PyTorch's tensor.to(dtype) converts: complex to
// real keeps the real part, anything to bool tests for non-zero.
template <class To, class From>
To convert_value(From v) {
  if constexpr (is_std_complex<From>) {
    if constexpr (is_std_complex<To>) {
      using R = typename To::value_type;
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else {
      return convert_value<To>(v.real());
    }
  } else if constexpr (is_std_complex<To>) {
    return To(static_cast<typename To::value_type>(v), 0);
  } else {
    return convert_real<To>(v);
  }
}

}  // namespace tensortree::detail
