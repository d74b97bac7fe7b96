// Element types, named exactly as PyTorch names them.
#pragma once

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "tensortree/export.hpp"
#include "tensortree/float_types.hpp"

namespace tensortree {

enum class DType : std::uint8_t {
  Bool,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
  Float8_e4m3fn,
  Float8_e5m2,
};

inline constexpr std::array<DType, 17> kAllDTypes = {
    DType::Bool,    DType::UInt8,     DType::UInt16,   DType::UInt32,        DType::UInt64,
    DType::Int8,    DType::Int16,     DType::Int32,    DType::Int64,         DType::Float16,
    DType::BFloat16, DType::Float32,  DType::Float64,  DType::Complex64,     DType::Complex128,
    DType::Float8_e4m3fn, DType::Float8_e5m2,
};

TT_API std::size_t itemsize(DType dtype);
// "float32", "int64", "bool", "float8_e4m3fn": PyTorch's names without the "torch." prefix.
TT_API std::string_view dtype_name(DType dtype);
// Accepts "float32" and "torch.float32", plus PyTorch's aliases ("float", "half", "long"...).
// Throws InvalidArgument naming the unknown string.
TT_API DType parse_dtype(std::string_view name);
// True when the raw value names a DType (for decoding untrusted bytes).
TT_API bool is_valid_dtype(std::uint8_t raw);
// InvalidArgument naming the raw value of a DType outside the enumeration.
[[noreturn]] TT_API void throw_invalid_dtype(DType dtype);

TT_API bool is_floating_point(DType dtype);  // float16/bfloat16/float32/float64/float8_*
TT_API bool is_complex(DType dtype);
TT_API bool is_integral(DType dtype);        // signed and unsigned integers, not bool

// PyTorch's torch.promote_types: the dtype an operation on tensors of `a` and `b` computes in.
// Categories order bool < integer < floating < complex, and within one the wider type wins, with
// PyTorch's exceptions: uint8 with int8 gives int16, float16 with bfloat16 gives float32, float64
// with complex64 gives complex128. As in PyTorch, float8 and uint16/32/64 promote only with
// themselves (and the latter with floating types): NotSupported otherwise. (type_promotion.cpp)
TT_API DType promote_types(DType a, DType b);
// torch.can_cast: whether an in-place operation may write a result of dtype `from` into a tensor of
// dtype `to` (no complex into real, no floating into integer or bool, nothing but bool into bool).
TT_API bool can_cast(DType from, DType to);

TT_API std::ostream& operator<<(std::ostream& os, DType dtype);

// The C++ element type of each DType, and back.
template <DType D> struct dtype_traits;
#define TT_DTYPE_TRAIT(D, T) \
  template <> struct dtype_traits<DType::D> { using type = T; };
TT_DTYPE_TRAIT(Bool, bool)
TT_DTYPE_TRAIT(UInt8, std::uint8_t)
TT_DTYPE_TRAIT(UInt16, std::uint16_t)
TT_DTYPE_TRAIT(UInt32, std::uint32_t)
TT_DTYPE_TRAIT(UInt64, std::uint64_t)
TT_DTYPE_TRAIT(Int8, std::int8_t)
TT_DTYPE_TRAIT(Int16, std::int16_t)
TT_DTYPE_TRAIT(Int32, std::int32_t)
TT_DTYPE_TRAIT(Int64, std::int64_t)
TT_DTYPE_TRAIT(Float16, Half)
TT_DTYPE_TRAIT(BFloat16, BFloat16)
TT_DTYPE_TRAIT(Float32, float)
TT_DTYPE_TRAIT(Float64, double)
TT_DTYPE_TRAIT(Complex64, std::complex<float>)
TT_DTYPE_TRAIT(Complex128, std::complex<double>)
TT_DTYPE_TRAIT(Float8_e4m3fn, Float8E4M3FN)
TT_DTYPE_TRAIT(Float8_e5m2, Float8E5M2)
#undef TT_DTYPE_TRAIT

template <class T> struct dtype_of;
#define TT_DTYPE_OF(T, D) \
  template <> struct dtype_of<T> { static constexpr DType value = DType::D; };
TT_DTYPE_OF(bool, Bool)
TT_DTYPE_OF(std::uint8_t, UInt8)
TT_DTYPE_OF(std::uint16_t, UInt16)
TT_DTYPE_OF(std::uint32_t, UInt32)
TT_DTYPE_OF(std::uint64_t, UInt64)
TT_DTYPE_OF(std::int8_t, Int8)
TT_DTYPE_OF(std::int16_t, Int16)
TT_DTYPE_OF(std::int32_t, Int32)
TT_DTYPE_OF(std::int64_t, Int64)
TT_DTYPE_OF(Half, Float16)
TT_DTYPE_OF(BFloat16, BFloat16)
TT_DTYPE_OF(float, Float32)
TT_DTYPE_OF(double, Float64)
TT_DTYPE_OF(std::complex<float>, Complex64)
TT_DTYPE_OF(std::complex<double>, Complex128)
TT_DTYPE_OF(Float8E4M3FN, Float8_e4m3fn)
TT_DTYPE_OF(Float8E5M2, Float8_e5m2)
#undef TT_DTYPE_OF

template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

// Calls fn(T{}) with a value of the C++ element type of `dtype` (a tag: only its type matters).
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
#define TT_VISIT_CASE(D) \
  case DType::D: return fn(typename dtype_traits<DType::D>::type{});
    TT_VISIT_CASE(Bool)
    TT_VISIT_CASE(UInt8)
    TT_VISIT_CASE(UInt16)
    TT_VISIT_CASE(UInt32)
    TT_VISIT_CASE(UInt64)
    TT_VISIT_CASE(Int8)
    TT_VISIT_CASE(Int16)
    TT_VISIT_CASE(Int32)
    TT_VISIT_CASE(Int64)
    TT_VISIT_CASE(Float16)
    TT_VISIT_CASE(BFloat16)
    TT_VISIT_CASE(Float32)
    TT_VISIT_CASE(Float64)
    TT_VISIT_CASE(Complex64)
    TT_VISIT_CASE(Complex128)
    TT_VISIT_CASE(Float8_e4m3fn)
    TT_VISIT_CASE(Float8_e5m2)
#undef TT_VISIT_CASE
  }
  throw_invalid_dtype(dtype);  // a value cast from bad bytes must not pass for bool
}

}  // namespace tensortree
