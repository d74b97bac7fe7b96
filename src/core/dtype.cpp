#include "tensortree/dtype.hpp"

#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t itemsize;
};

constexpr DTypeInfo kInfo[] = {
    {DType::Bool, "bool", 1},
    {DType::UInt8, "uint8", 1},
    {DType::UInt16, "uint16", 2},
    {DType::UInt32, "uint32", 4},
    {DType::UInt64, "uint64", 8},
    {DType::Int8, "int8", 1},
    {DType::Int16, "int16", 2},
    {DType::Int32, "int32", 4},
    {DType::Int64, "int64", 8},
    {DType::Float16, "float16", 2},
    {DType::BFloat16, "bfloat16", 2},
    {DType::Float32, "float32", 4},
    {DType::Float64, "float64", 8},
    {DType::Complex64, "complex64", 8},
    {DType::Complex128, "complex128", 16},
    {DType::Float8_e4m3fn, "float8_e4m3fn", 1},
    {DType::Float8_e5m2, "float8_e5m2", 1},
};
static_assert(std::size(kInfo) == kAllDTypes.size());
static_assert([] {
  for (std::size_t i = 0; i < std::size(kInfo); ++i) {
    if (static_cast<std::size_t>(kInfo[i].dtype) != i || kAllDTypes[i] != kInfo[i].dtype) return false;
  }
  return true;
}(), "kInfo and kAllDTypes must list the dtypes in enumeration order");

// PyTorch's other spellings of the same dtypes (torch.half is torch.float16, and so on).
constexpr std::pair<std::string_view, DType> kAliases[] = {
    {"half", DType::Float16},      {"float", DType::Float32},    {"double", DType::Float64},
    {"cfloat", DType::Complex64},  {"cdouble", DType::Complex128},
    {"short", DType::Int16},       {"int", DType::Int32},        {"long", DType::Int64},
};

const DTypeInfo& info(DType dtype) {
  if (!is_valid_dtype(static_cast<std::uint8_t>(dtype))) throw_invalid_dtype(dtype);
  return kInfo[static_cast<std::size_t>(dtype)];
}

}  // namespace

void throw_invalid_dtype(DType dtype) {
  throw InvalidArgument(fmt::format("unknown dtype value {}", static_cast<unsigned>(dtype)));
}

std::size_t itemsize(DType dtype) { return info(dtype).itemsize; }

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

bool is_valid_dtype(std::uint8_t raw) { return raw < std::size(kInfo); }

DType parse_dtype(std::string_view name) {
  std::string_view bare = name;
  if (bare.starts_with("torch.")) bare.remove_prefix(6);
  for (const auto& entry : kInfo) {
    if (entry.name == bare) return entry.dtype;
  }
  for (const auto& [alias, dtype] : kAliases) {
    if (alias == bare) return dtype;
  }
  throw InvalidArgument(fmt::format("unknown dtype name '{}'", name));
}

bool is_floating_point(DType dtype) {
  switch (dtype) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
    case DType::Float64:
    case DType::Float8_e4m3fn:
    case DType::Float8_e5m2:
      return true;
    default:
      return false;
  }
}

bool is_complex(DType dtype) { return dtype == DType::Complex64 || dtype == DType::Complex128; }

bool is_integral(DType dtype) {
  switch (dtype) {
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64:
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
      return true;
    default:
      return false;
  }
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

}  // namespace tensortree
