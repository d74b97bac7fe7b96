// Storage types for the 16- and 8-bit floating formats, with exact widening to float and
// round-to-nearest-even narrowing from float (the conversions PyTorch performs on the CPU).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tensortree {

namespace detail {

constexpr float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal or zero: mant * 2^-24, exact in float.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

constexpr std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t mant = x & 0x7fffffu;
  const int exp = static_cast<int>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const unsigned shift = static_cast<unsigned>(14 - e);
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = sign | (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rolls into the exponent
  return static_cast<std::uint16_t>(h);
}

constexpr std::uint16_t float_to_bfloat16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// An 8-bit float with kExp exponent bits and kMant mantissa bits. kFiniteOnly formats (e4m3fn)
// have no infinity: the all-ones pattern is NaN and overflow becomes NaN, as in PyTorch.
template <int kExp, int kMant, bool kFiniteOnly>
struct Fp8Format {
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr int kMinNormalExp = 1 - kBias;
  static constexpr std::uint8_t kNaN = 0x7f;
  static constexpr std::uint8_t kInf = static_cast<std::uint8_t>(((1 << kExp) - 1) << kMant);

  static float max_finite() {
    return kFiniteOnly ? std::ldexp(2.0f - 2.0f / (1 << kMant), (1 << kExp) - 1 - kBias)
                       : std::ldexp(2.0f - 1.0f / (1 << kMant), (1 << kExp) - 2 - kBias);
  }

  static float to_float(std::uint8_t bits) {
    const bool negative = bits & 0x80u;
    const int exp = (bits >> kMant) & ((1 << kExp) - 1);
    const int mant = bits & ((1 << kMant) - 1);
    float v;
    if (kFiniteOnly && (bits & 0x7fu) == kNaN) {
      v = std::nanf("");
    } else if (!kFiniteOnly && exp == (1 << kExp) - 1) {
      v = mant ? std::nanf("") : INFINITY;
    } else if (exp == 0) {
      v = std::ldexp(static_cast<float>(mant), kMinNormalExp - kMant);
    } else {
      v = std::ldexp(1.0f + static_cast<float>(mant) / (1 << kMant), exp - kBias);
    }
    return negative ? -v : v;
  }

  static std::uint8_t from_float(float f) {
    const std::uint8_t sign = std::signbit(f) ? 0x80u : 0u;
    if (std::isnan(f)) return sign | kNaN;
    const float a = std::fabs(f);
    if (std::isinf(a)) return sign | (kFiniteOnly ? kNaN : kInf);
    int exp2 = 0;
    std::frexp(a, &exp2);
    const int e = std::max(exp2 - 1, kMinNormalExp);
    const float step = std::ldexp(1.0f, e - kMant);
    const float q = std::nearbyint(a / step) * step;  // exact: step is a power of two
    if (q > max_finite()) return sign | (kFiniteOnly ? kNaN : kInf);
    if (q == 0.0f) return sign;
    std::frexp(q, &exp2);
    const int qe = exp2 - 1;
    if (qe < kMinNormalExp) {
      return sign | static_cast<std::uint8_t>(q / std::ldexp(1.0f, kMinNormalExp - kMant));
    }
    const int mant = static_cast<int>((q / std::ldexp(1.0f, qe) - 1.0f) * (1 << kMant));
    return sign | static_cast<std::uint8_t>(((qe + kBias) << kMant) | mant);
  }
};

using E4M3FN = Fp8Format<4, 3, true>;
using E5M2 = Fp8Format<5, 2, false>;

}  // namespace detail

struct Half {
  std::uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) : bits(detail::float_to_half_bits(f)) {}
  explicit operator float() const { return detail::half_bits_to_float(bits); }
};

struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(detail::float_to_bfloat16_bits(f)) {}
  explicit operator float() const {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }
};

struct Float8E4M3FN {
  std::uint8_t bits = 0;
  Float8E4M3FN() = default;
  explicit Float8E4M3FN(float f) : bits(detail::E4M3FN::from_float(f)) {}
  explicit operator float() const { return detail::E4M3FN::to_float(bits); }
};

struct Float8E5M2 {
  std::uint8_t bits = 0;
  Float8E5M2() = default;
  explicit Float8E5M2(float f) : bits(detail::E5M2::from_float(f)) {}
  explicit operator float() const { return detail::E5M2::to_float(bits); }
};

}  // namespace tensortree
