#include <catch2/catch.hpp>

#include <cmath>

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
