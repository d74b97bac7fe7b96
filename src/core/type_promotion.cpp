// PyTorch's type promotion (c10/core/ScalarType.cpp's promoteTypes and canCast), computed from
// categories and widths rather than kept as a 17x17 table.
#include "core/type_promotion.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

enum class Category { Bool, Integer, Floating, Complex };

Category category_of(DType dtype) {
  if (dtype == DType::Bool) return Category::Bool;
  if (is_integral(dtype)) return Category::Integer;
  if (is_complex(dtype)) return Category::Complex;
  return Category::Floating;
}

bool is_float8(DType dtype) { return dtype == DType::Float8_e4m3fn || dtype == DType::Float8_e5m2; }
bool is_wide_unsigned(DType dtype) {
  return dtype == DType::UInt16 || dtype == DType::UInt32 || dtype == DType::UInt64;
}

DType promote_integers(DType a, DType b) {
  // Only uint8 is unsigned here (the wider ones were handled before): it fits any wider signed type.
  if (a == DType::UInt8) std::swap(a, b);
  if (b == DType::UInt8) return a == DType::Int8 ? DType::Int16 : a;
  return itemsize(a) >= itemsize(b) ? a : b;
}

DType promote_floats(DType a, DType b) {
  if (itemsize(a) == itemsize(b)) return DType::Float32;  // float16 with bfloat16
  return itemsize(a) > itemsize(b) ? a : b;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_float8(a) || is_float8(b)) {
    throw NotSupported(fmt::format("promotion of {} with {}: float8 types promote only with themselves", a, b));
  }
  if (is_wide_unsigned(a) || is_wide_unsigned(b)) {
    if (category_of(a) == Category::Floating) return a;
    if (category_of(b) == Category::Floating) return b;
    throw NotSupported(fmt::format("promotion of {} with {}: uint16, uint32 and uint64 promote only with "
                                   "themselves and floating types", a, b));
  }
  const Category ca = category_of(a);
  const Category cb = category_of(b);
  if (ca != cb) {
    const DType high = ca > cb ? a : b;
    const DType low = ca > cb ? b : a;
    if (high == DType::Complex64 && low == DType::Float64) return DType::Complex128;
    return high;
  }
  switch (ca) {
    case Category::Integer: return promote_integers(a, b);
    case Category::Floating: return promote_floats(a, b);
    case Category::Complex: return itemsize(a) > itemsize(b) ? a : b;
    case Category::Bool: break;
  }
  return a;
}

bool can_cast(DType from, DType to) {
  const Category f = category_of(from);
  const Category t = category_of(to);
  if (f == Category::Complex && t != Category::Complex) return false;
  if (f == Category::Floating && (t == Category::Integer || t == Category::Bool)) return false;
  return !(f != Category::Bool && t == Category::Bool);
}

namespace detail {

DType promote_with_scalar(DType dtype) {
  const Category c = category_of(dtype);
  return c == Category::Bool || c == Category::Integer ? DType::Float32 : dtype;
}

DType floating_result(DType dtype) { return promote_with_scalar(dtype); }

bool kernel_computes(DType dtype) { return !is_complex(dtype) && !is_float8(dtype); }

}  // namespace detail

}  // namespace tensortree
