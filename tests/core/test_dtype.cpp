#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;

TEST_CASE("every dtype has PyTorch's name and itemsize, and parses back") {
  for (DType dtype : kAllDTypes) {
    const std::string name(dtype_name(dtype));
    CHECK(parse_dtype(name) == dtype);
    CHECK(parse_dtype("torch." + name) == dtype);
    CHECK(itemsize(dtype) == visit_dtype(dtype, [](auto tag) { return sizeof(tag); }));
  }
  CHECK(dtype_name(DType::Float8_e4m3fn) == "float8_e4m3fn");
  CHECK(itemsize(DType::Complex128) == 16);
  CHECK(parse_dtype("long") == DType::Int64);
  CHECK(parse_dtype("half") == DType::Float16);
}

TEST_CASE("parse_dtype names the unknown string") {
  REQUIRE_THROWS_AS(parse_dtype("float33"), InvalidArgument);
  REQUIRE_THROWS_WITH(parse_dtype("float33"), Catch::Contains("float33"));
}

TEST_CASE("dtype categories") {
  CHECK(is_floating_point(DType::BFloat16));
  CHECK(is_floating_point(DType::Float8_e5m2));
  CHECK_FALSE(is_floating_point(DType::Int32));
  CHECK(is_complex(DType::Complex64));
  CHECK(is_integral(DType::UInt16));
  CHECK_FALSE(is_integral(DType::Bool));
}

TEST_CASE("half and bfloat16 round to nearest even") {
  CHECK(static_cast<float>(Half(1.0f)) == 1.0f);
  CHECK(Half(1.0f).bits == 0x3c00);
  CHECK(Half(65504.0f).bits == 0x7bff);
  CHECK(Half(65520.0f).bits == 0x7c00);           // rounds up to infinity
  CHECK(Half(5.9604644775390625e-8f).bits == 1);  // smallest subnormal
  CHECK(static_cast<float>(Half(-2.5f)) == -2.5f);
  CHECK(Half(1.0f + 1.0f / 2048).bits == 0x3c00);  // tie to even stays
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(static_cast<float>(BFloat16(3.0f)) == 3.0f);
  CHECK(std::isnan(static_cast<float>(BFloat16(NAN))));
}

TEST_CASE("float8 formats: exact values, saturation and NaN as in PyTorch") {
  CHECK(static_cast<float>(Float8E4M3FN(448.0f)) == 448.0f);
  CHECK(Float8E4M3FN(448.0f).bits == 0x7e);
  CHECK(std::isnan(static_cast<float>(Float8E4M3FN(1000.0f))));
  CHECK(static_cast<float>(Float8E4M3FN(0.001953125f)) == 0.001953125f);  // smallest subnormal 2^-9
  CHECK(static_cast<float>(Float8E4M3FN(-1.5f)) == -1.5f);
  CHECK(static_cast<float>(Float8E5M2(57344.0f)) == 57344.0f);
  CHECK(std::isinf(static_cast<float>(Float8E5M2(1e6f))));
  CHECK(static_cast<float>(Float8E5M2(0.75f)) == 0.75f);
  // Every encodable e4m3fn value survives a round trip through float.
  for (int bits = 0; bits < 256; ++bits) {
    Float8E4M3FN v;
    v.bits = static_cast<std::uint8_t>(bits);
    const float f = static_cast<float>(v);
    if (!std::isnan(f)) CHECK(Float8E4M3FN(f).bits == v.bits);
  }
}

TEST_CASE("dtype names follow the enumeration in PyTorch's spelling") {
  const std::vector<std::string> expected = {
      "bool",    "uint8",    "uint16",  "uint32",  "uint64",    "int8",       "int16",
      "int32",   "int64",    "float16", "bfloat16", "float32",  "float64",    "complex64",
      "complex128", "float8_e4m3fn", "float8_e5m2"};
  REQUIRE(kAllDTypes.size() == expected.size());
  for (std::size_t i = 0; i < kAllDTypes.size(); ++i) {
    CHECK(static_cast<std::size_t>(kAllDTypes[i]) == i);
    CHECK(dtype_name(kAllDTypes[i]) == expected[i]);
  }
  std::ostringstream os;
  os << DType::BFloat16;
  CHECK(os.str() == "bfloat16");
}

TEST_CASE("every PyTorch alias parses, with or without the torch. prefix") {
  const std::vector<std::pair<std::string, DType>> aliases = {
      {"half", DType::Float16},     {"float", DType::Float32},       {"double", DType::Float64},
      {"cfloat", DType::Complex64}, {"cdouble", DType::Complex128}, {"short", DType::Int16},
      {"int", DType::Int32},        {"long", DType::Int64}};
  for (const auto& [alias, dtype] : aliases) {
    INFO(alias);
    CHECK(parse_dtype(alias) == dtype);
    CHECK(parse_dtype("torch." + alias) == dtype);
  }
  REQUIRE_THROWS_AS(parse_dtype("torch."), InvalidArgument);
  REQUIRE_THROWS_AS(parse_dtype("Float32"), InvalidArgument);
  REQUIRE_THROWS_AS(parse_dtype("torch.torch.float32"), InvalidArgument);
}

TEST_CASE("a raw value outside the enumeration is rejected everywhere, never taken for bool") {
  CHECK(is_valid_dtype(16));
  CHECK_FALSE(is_valid_dtype(17));
  CHECK_FALSE(is_valid_dtype(255));
  const auto bad = static_cast<DType>(17);
  REQUIRE_THROWS_WITH(itemsize(bad), Catch::Contains("17"));
  REQUIRE_THROWS_AS(dtype_name(bad), InvalidArgument);
  REQUIRE_THROWS_AS(visit_dtype(bad, [](auto tag) { return sizeof(tag); }), InvalidArgument);
  CHECK_FALSE(is_integral(bad));
}

TEST_CASE("each dtype falls in exactly one category, and its C++ type maps back to it") {
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    const int categories = int{dtype == DType::Bool} + int{is_integral(dtype)} +
                           int{is_floating_point(dtype)} + int{is_complex(dtype)};
    CHECK(categories == 1);
    CHECK(visit_dtype(dtype, [](auto tag) { return dtype_v<decltype(tag)>; }) == dtype);
  }
  CHECK(is_integral(DType::Int8));
  CHECK(is_integral(DType::UInt64));
  CHECK(is_floating_point(DType::Float8_e4m3fn));
  CHECK(is_complex(DType::Complex128));
}

TEST_CASE("every finite half and bfloat16 value survives a round trip through float") {
  int half_mismatches = 0;
  int bfloat16_mismatches = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    Half h;
    h.bits = static_cast<std::uint16_t>(bits);
    BFloat16 b;
    b.bits = static_cast<std::uint16_t>(bits);
    const float hf = static_cast<float>(h);
    const float bf = static_cast<float>(b);
    half_mismatches += std::isnan(hf) ? !std::isnan(static_cast<float>(Half(hf))) : Half(hf).bits != h.bits;
    bfloat16_mismatches +=
        std::isnan(bf) ? !std::isnan(static_cast<float>(BFloat16(bf))) : BFloat16(bf).bits != b.bits;
  }
  CHECK(half_mismatches == 0);
  CHECK(bfloat16_mismatches == 0);
}

TEST_CASE("half and bfloat16 round ties to even, keep the sign of zero and overflow to infinity") {
  CHECK(Half(std::ldexp(1.0f, -25)).bits == 0);    // half the smallest subnormal: tie to 0
  CHECK(Half(std::ldexp(1.5f, -25)).bits == 1);    // above the tie
  CHECK(Half(1.0f + 3.0f / 2048).bits == 0x3c02);  // tie between 0x3c01 and 0x3c02
  CHECK(Half(-0.0f).bits == 0x8000);
  CHECK(Half(-1e6f).bits == 0xfc00);
  CHECK(std::isinf(static_cast<float>(Half(INFINITY))));
  CHECK(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);      // tie stays even
  CHECK(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits == 0x3f82);  // tie rounds up to even
  CHECK(BFloat16(-0.0f).bits == 0x8000);
  CHECK(BFloat16(3.4e38f).bits == 0x7f80);  // rounds past the largest finite value
}

TEST_CASE("float8 rounding at the edges of their ranges matches PyTorch") {
  CHECK(Float8E4M3FN(464.0f).bits == 0x7e);  // tie between 448 and 480 goes to even 448
  CHECK(std::isnan(static_cast<float>(Float8E4M3FN(470.0f))));
  CHECK(std::isnan(static_cast<float>(Float8E4M3FN(INFINITY))));
  CHECK(Float8E4M3FN(-0.0f).bits == 0x80);
  CHECK(Float8E4M3FN(std::ldexp(1.0f, -10)).bits == 0);         // half the smallest subnormal: tie to 0
  CHECK(Float8E5M2(60000.0f).bits == 0x7b);                     // 57344
  CHECK(std::isinf(static_cast<float>(Float8E5M2(61440.0f))));  // tie rounds up to even: infinity
  CHECK(Float8E5M2(-INFINITY).bits == 0xfc);
  CHECK(std::isnan(static_cast<float>(Float8E5M2(NAN))));
  for (int bits = 0; bits < 256; ++bits) {
    Float8E5M2 v;
    v.bits = static_cast<std::uint8_t>(bits);
    const float f = static_cast<float>(v);
    if (!std::isnan(f)) CHECK(Float8E5M2(f).bits == v.bits);
  }
}
