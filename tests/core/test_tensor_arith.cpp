// Element-wise arithmetic, comparisons and casts on tensors, against values worked out by hand and
// PyTorch's promotion table (torch.promote_types), across dtypes, broadcasting and strided views.
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensor_checks.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;
using Catch::Matchers::Contains;
using tensortree::test::require_values;

namespace {

// A CPU tensor of `shape` holding `values` (C order) as `dtype` stores them.
Tensor make(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::empty(std::move(shape), {dtype});
  REQUIRE(t.numel() == static_cast<std::int64_t>(values.size()));
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* p = t.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = values[i] != 0;
      } else if constexpr (std::is_arithmetic_v<T>) {
        p[i] = static_cast<T>(values[i]);
      } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        p[i] = T(static_cast<typename T::value_type>(values[i]), 0);
      } else {
        p[i] = T(static_cast<float>(values[i]));
      }
    }
  });
  return t;
}

Tensor make(DType dtype, const std::vector<double>& values) {
  return make(dtype, {static_cast<std::int64_t>(values.size())}, values);
}

}  // namespace

TEST_CASE("promote_types follows PyTorch's table for every pair of categories") {
  // bool with anything
  CHECK(promote_types(DType::Bool, DType::Bool) == DType::Bool);
  CHECK(promote_types(DType::Bool, DType::Int32) == DType::Int32);
  CHECK(promote_types(DType::Bool, DType::Float16) == DType::Float16);
  CHECK(promote_types(DType::Bool, DType::Complex64) == DType::Complex64);
  // integer with integer
  CHECK(promote_types(DType::Int8, DType::UInt8) == DType::Int16);
  CHECK(promote_types(DType::UInt8, DType::Int64) == DType::Int64);
  CHECK(promote_types(DType::UInt8, DType::Int16) == DType::Int16);
  CHECK(promote_types(DType::Int16, DType::Int32) == DType::Int32);
  CHECK(promote_types(DType::Int64, DType::Int8) == DType::Int64);
  // integer with floating and complex: the floating / complex type, whatever its width
  CHECK(promote_types(DType::Int64, DType::Float16) == DType::Float16);
  CHECK(promote_types(DType::Int32, DType::BFloat16) == DType::BFloat16);
  CHECK(promote_types(DType::UInt8, DType::Float64) == DType::Float64);
  CHECK(promote_types(DType::Int64, DType::Complex64) == DType::Complex64);
  // floating with floating
  CHECK(promote_types(DType::Float16, DType::BFloat16) == DType::Float32);
  CHECK(promote_types(DType::Float16, DType::Float32) == DType::Float32);
  CHECK(promote_types(DType::BFloat16, DType::Float64) == DType::Float64);
  CHECK(promote_types(DType::Float32, DType::Float64) == DType::Float64);
  // floating with complex, complex with complex
  CHECK(promote_types(DType::Float32, DType::Complex64) == DType::Complex64);
  CHECK(promote_types(DType::Float64, DType::Complex64) == DType::Complex128);
  CHECK(promote_types(DType::Float16, DType::Complex128) == DType::Complex128);
  CHECK(promote_types(DType::Complex64, DType::Complex128) == DType::Complex128);
  // the wide unsigned and float8 types promote as far as PyTorch lets them
  CHECK(promote_types(DType::UInt16, DType::UInt16) == DType::UInt16);
  CHECK(promote_types(DType::UInt32, DType::Float32) == DType::Float32);
  CHECK_THROWS_AS(promote_types(DType::UInt16, DType::Int32), NotSupported);
  CHECK(promote_types(DType::Float8_e4m3fn, DType::Float8_e4m3fn) == DType::Float8_e4m3fn);
  CHECK_THROWS_AS(promote_types(DType::Float8_e5m2, DType::Float32), NotSupported);
}

TEST_CASE("promote_types is symmetric wherever it is defined") {
  for (const DType a : kAllDTypes) {
    for (const DType b : kAllDTypes) {
      INFO(dtype_name(a) << " with " << dtype_name(b));
      bool defined = true;
      DType ab = a;
      try {
        ab = promote_types(a, b);
      } catch (const NotSupported&) {
        defined = false;
      }
      if (defined) {
        CHECK(promote_types(b, a) == ab);
      } else {
        CHECK_THROWS_AS(promote_types(b, a), NotSupported);
      }
    }
  }
}

TEST_CASE("can_cast refuses complex into real, floating into integer, and anything but bool into bool") {
  CHECK(can_cast(DType::Int64, DType::Int32));
  CHECK(can_cast(DType::Int64, DType::Float16));
  CHECK(can_cast(DType::Bool, DType::Bool));
  CHECK_FALSE(can_cast(DType::Float32, DType::Int64));
  CHECK_FALSE(can_cast(DType::Complex64, DType::Float64));
  CHECK_FALSE(can_cast(DType::Int8, DType::Bool));
}

TEST_CASE("binary operations promote their operands as PyTorch does") {
  // int8 + uint8 -> int16: neither holds both ranges
  const Tensor sum = make(DType::Int8, {-100, 100}) + make(DType::UInt8, {200, 100});
  CHECK(sum.dtype() == DType::Int16);
  require_values(sum, {100, 200});
  const Tensor wide = make(DType::UInt8, {255, 1}) * make(DType::Int64, {1000, -3});
  CHECK(wide.dtype() == DType::Int64);
  require_values(wide, {255000, -3});
  // integer / integer is true division, in float32
  const Tensor q = make(DType::Int32, {7, -7, 1}) / make(DType::Int32, {2, 2, 4});
  CHECK(q.dtype() == DType::Float32);
  require_values(q, {3.5, -3.5, 0.25});
  // float16 with bfloat16 meet in float32
  const Tensor mixed = make(DType::Float16, {1.5, -2}) + make(DType::BFloat16, {2.25, 0.5});
  CHECK(mixed.dtype() == DType::Float32);
  require_values(mixed, {3.75, -1.5});
  // integer with floating takes the floating type, even a narrower one
  const Tensor f = make(DType::Int64, {3, 4}) - make(DType::Float16, {0.5, 0.25});
  CHECK(f.dtype() == DType::Float16);
  require_values(f, {2.5, 3.75});
  const Tensor d = make(DType::Float32, {1.5}) * make(DType::Float64, {4});
  CHECK(d.dtype() == DType::Float64);
  require_values(d, {6});
  // float64 with complex64 gives complex128: (1+2i)(3+4i) = -5+10i
  Tensor c = Tensor::empty({1}, {DType::Complex64});
  c.data<std::complex<float>>()[0] = {1, 2};
  Tensor z = Tensor::empty({1}, {DType::Complex64});
  z.data<std::complex<float>>()[0] = {3, 4};
  const Tensor prod = c * z;
  CHECK(prod.dtype() == DType::Complex64);
  CHECK(prod.value_at_linear(0) == std::complex<double>(-5, 10));
  const Tensor promoted = c * make(DType::Float64, {2});
  CHECK(promoted.dtype() == DType::Complex128);
  CHECK(promoted.value_at_linear(0) == std::complex<double>(2, 4));
}

TEST_CASE("bool tensors add as or and multiply as and; subtracting them is refused") {
  const Tensor a = make(DType::Bool, {0, 1, 0, 1});
  const Tensor b = make(DType::Bool, {0, 0, 1, 1});
  CHECK((a + b).dtype() == DType::Bool);
  require_values(a + b, {0, 1, 1, 1});
  require_values(a * b, {0, 0, 0, 1});
  CHECK_THROWS_WITH(a - b, Contains("sub of bool[4] and bool[4]"));
  const Tensor ratio = a / make(DType::Bool, {1, 1, 1, 1});
  CHECK(ratio.dtype() == DType::Float32);
  require_values(ratio, {0, 1, 0, 1});
  require_values(a + make(DType::Int32, {5, 5, 5, 5}), {5, 6, 5, 6});
}

TEST_CASE("integer arithmetic wraps on overflow as PyTorch's does") {
  constexpr double kMax = std::numeric_limits<std::int32_t>::max();
  constexpr double kMin = std::numeric_limits<std::int32_t>::min();
  require_values(make(DType::Int32, {kMax, kMin}) + make(DType::Int32, {1, -1}), {kMin, kMax});
  require_values(make(DType::UInt8, {250, 3}) + make(DType::UInt8, {10, 4}), {4, 7});
  require_values(make(DType::UInt16, {300}) * make(DType::UInt16, {300}), {90000 % 65536});
  require_values(make(DType::Int8, {-128}).neg(), {-128});
}

TEST_CASE("a floating scalar turns integer tensors into float32 and keeps floating dtypes, on either side") {
  const Tensor ints = make(DType::Int64, {1, 2, 3});
  const Tensor half_more = ints + 0.5;
  CHECK(half_more.dtype() == DType::Float32);
  require_values(half_more, {1.5, 2.5, 3.5});
  const Tensor twice = ints * 2.0;
  CHECK(twice.dtype() == DType::Float32);
  require_values(twice, {2, 4, 6});
  const Tensor doubles = make(DType::Float64, {1, 2, 4});
  CHECK((doubles * 2).dtype() == DType::Float64);
  require_values(10 - doubles, {9, 8, 6});
  require_values(1 / doubles, {1, 0.5, 0.25});
  require_values(doubles / 4, {0.25, 0.5, 1});
  require_values(3 + doubles, {4, 5, 7});
  require_values(doubles - 1, {0, 1, 3});
  const Tensor halves = make(DType::Float16, {1, 2}) + 0.25;
  CHECK(halves.dtype() == DType::Float16);
  require_values(halves, {1.25, 2.25});
  const Tensor bools = make(DType::Bool, {1, 0}) * 3.0;
  CHECK(bools.dtype() == DType::Float32);
  require_values(bools, {3, 0});
  const Tensor fp8 = make(DType::Float8_e4m3fn, {1, 2}) * 2;
  CHECK(fp8.dtype() == DType::Float8_e4m3fn);
  require_values(fp8, {2, 4});
}

TEST_CASE("an integer scalar keeps an integer tensor's dtype, as a Python int does in PyTorch") {
  const Tensor int32s = Tensor::arange({3}, 1, 1, {DType::Int32});
  const Tensor plus_two = int32s + 2;
  CHECK(plus_two.dtype() == DType::Int32);
  require_values(plus_two, {3, 4, 5});
  CHECK((int32s + 2.5).dtype() == DType::Float32);
  require_values(int32s + 2.5, {3.5, 4.5, 5.5});
  require_values(10 - int32s, {9, 8, 7});
  CHECK((10 - int32s).dtype() == DType::Int32);
  CHECK((int32s * std::int64_t{3}).dtype() == DType::Int32);
  CHECK((int32s * 3U).dtype() == DType::Int32);
  // True division of integers gives float32 whatever the scalar.
  CHECK((int32s / 2).dtype() == DType::Float32);
  require_values(int32s / 2, {0.5, 1, 1.5});
  // bool with an integer is int64.
  const Tensor bools = make(DType::Bool, {1, 0}) + 2;
  CHECK(bools.dtype() == DType::Int64);
  require_values(bools, {3, 2});
  // The scalar converts to uint8 as PyTorch converts it: 250 + 300 wraps to 38.
  const Tensor bytes = make(DType::UInt8, {250, 1}) + 300;
  CHECK(bytes.dtype() == DType::UInt8);
  require_values(bytes, {38, 45});
  // Past float32's exact integers, integers stay exact.
  const Tensor big = make(DType::Int64, {16777216}) + 1;
  CHECK(big.dtype() == DType::Int64);
  CHECK(*big.data<std::int64_t>() == 16777217);
  // Floating tensors keep their dtype with an integer too.
  CHECK((make(DType::Float16, {1}) * 2).dtype() == DType::Float16);
  CHECK((make(DType::Float64, {1}) - 1).dtype() == DType::Float64);
}

TEST_CASE("in place, an integer scalar keeps an integer tensor; a floating one or a division is refused") {
  const Tensor ints = make(DType::Int32, {1, 2, 3});
  ints += 5;
  require_values(ints, {6, 7, 8});
  ints *= 2;
  require_values(ints, {12, 14, 16});
  CHECK(ints.dtype() == DType::Int32);
  CHECK_THROWS_AS(ints += 0.5, InvalidArgument);
  CHECK_THROWS_AS(ints /= 2, InvalidArgument);
}

TEST_CASE("comparisons with an integer scalar are exact, also with one the dtype cannot hold") {
  const Tensor big = make(DType::Int64, {16777216, 16777217});
  require_values(big == 16777217, {0, 1});
  const Tensor small = make(DType::Int8, {44, 100});
  // 300 wraps to 44 in int8, but compares by value.
  require_values(small == 300, {0, 0});
  require_values(small < 300, {1, 1});
  require_values(small > 50, {0, 1});
}

TEST_CASE("operands broadcast as in NumPy; shapes that do not are refused with both shapes") {
  const Tensor m = Tensor::arange({2, 3}, 1, 1, {DType::Float32});  // 1..6
  require_values(m + make(DType::Float32, {10, 20, 30}), {11, 22, 33, 14, 25, 36});
  const Tensor col = make(DType::Int32, {2, 1}, {100, 200});
  const Tensor row = make(DType::Int32, {1, 3}, {1, 2, 3});
  const Tensor outer = col + row;
  CHECK(outer.shape() == Shape{2, 3});
  require_values(outer, {101, 102, 103, 201, 202, 203});
  const Tensor scalar_tensor = make(DType::Float32, {}, {2});
  require_values(m * scalar_tensor, {2, 4, 6, 8, 10, 12});
  CHECK_THROWS_AS(m + make(DType::Float32, {1, 2}), InvalidArgument);
  CHECK_THROWS_WITH(m + make(DType::Float32, {1, 2}), Contains("add") && Contains("[2, 3]") && Contains("[2]"));
}

TEST_CASE("non-contiguous operands: transposed, sliced with a step, and expanded views") {
  const Tensor m = Tensor::arange({2, 3}, 1, 1, {DType::Float32});  // [[1,2,3],[4,5,6]]
  const Tensor t = m.transpose(0, 1);                               // [[1,4],[2,5],[3,6]]
  REQUIRE_FALSE(t.is_contiguous());
  const Tensor other = Tensor::arange({3, 2}, 10, 10, {DType::Float32});  // [[10,20],[30,40],[50,60]]
  require_values(t + other, {11, 24, 32, 45, 53, 66});
  require_values(other - t, {9, 16, 28, 35, 47, 54});
  const Tensor stepped = Tensor::arange({8}, 0, 1, {DType::Int64}).slice(0, {1, 8, 2});  // 1 3 5 7
  REQUIRE_FALSE(stepped.is_contiguous());
  require_values(stepped * stepped, {1, 9, 25, 49});
  require_values(stepped * 0.5, {0.5, 1.5, 2.5, 3.5});
  const Tensor expanded = make(DType::Float64, {3, 1}, {1, 2, 3}).expand({3, 4});
  require_values(expanded + t.select(1, 0).unsqueeze(1), {2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6});
  const Tensor squares = make(DType::Int32, {3, 1}, {1, 4, 9}).expand({3, 2});
  require_values(squares.sqrt(), {1, 1, 2, 2, 3, 3});
}

TEST_CASE("large operands split across threads compute every element, contiguous or strided") {
  const std::int64_t rows = 1024;
  const std::int64_t cols = 512;  // 2 MiB of float32
  const Tensor a = Tensor::arange({rows, cols}, 1, 1, {DType::Float32});
  const Tensor b = Tensor::arange({rows, cols}, 0, 2, {DType::Float32});
  const Tensor sum = a + b;
  const auto* s = sum.data<float>();
  for (std::int64_t i = 0; i < rows * cols; i += 4099) REQUIRE(s[i] == static_cast<float>(1 + 3 * i));
  REQUIRE(s[rows * cols - 1] == static_cast<float>(1 + 3 * (rows * cols - 1)));
  const Tensor sq = Tensor::arange({cols, cols}, 0, 1, {DType::Float64});
  const Tensor tr = sq.transpose(0, 1) - sq;  // element [i][j] = (j*cols+i) - (i*cols+j)
  const auto* p = tr.data<double>();
  for (std::int64_t i = 0; i < cols; i += 37) {
    for (std::int64_t j = 0; j < cols; j += 41) {
      REQUIRE(p[i * cols + j] == static_cast<double>((j * cols + i) - (i * cols + j)));
    }
  }
}

TEST_CASE("in-place forms write into the tensor, views included, and refuse results that do not cast back") {
  const Tensor f = make(DType::Float32, {1, 2, 3});
  f += make(DType::Int64, {10, 20, 30});
  require_values(f, {11, 22, 33});
  f.mul_(2).sub_(1.0);
  require_values(f, {21, 43, 65});
  f /= 2;
  require_values(f, {10.5, 21.5, 32.5});
  const Tensor ints = make(DType::Int32, {1, 2});
  ints += make(DType::Int64, {100, 200});  // int64 casts back to int32
  CHECK(ints.dtype() == DType::Int32);
  require_values(ints, {101, 202});
  CHECK_THROWS_AS(ints += 0.5, InvalidArgument);
  CHECK_THROWS_WITH(ints.add_(0.5), Contains("add_") && Contains("float32") && Contains("int32"));
  CHECK_THROWS_WITH(ints += make(DType::Float32, {1, 1}), Contains("float32") && Contains("int32"));
  CHECK_THROWS_WITH(ints.div_(make(DType::Int32, {1, 1})), Contains("div_"));
  require_values(ints, {101, 202});  // refused before any write
  CHECK_THROWS_WITH(make(DType::Float32, {1}) += make(DType::Float32, {1, 2}), Contains("[2]") && Contains("[1]"));
  const Tensor m = Tensor::arange({2, 3}, 1, 1, {DType::Float64});
  m.transpose(0, 1).add_(make(DType::Float64, {3, 1}, {100, 200, 300}));  // row j of the view is column j
  require_values(m, {101, 202, 303, 104, 205, 306});
  const Tensor halves = make(DType::Float16, {1.5});
  halves *= 3;
  require_values(halves, {4.5});
}

TEST_CASE("unary functions: neg, abs, sqrt, exp, log, with their result dtypes") {
  require_values(make(DType::Int16, {3, -4}).neg(), {-3, 4});
  require_values(-make(DType::Float32, {1.5}), {-1.5});
  const Tensor ia = make(DType::Int64, {-7, 7}).abs();
  CHECK(ia.dtype() == DType::Int64);
  require_values(ia, {7, 7});
  require_values(make(DType::BFloat16, {-2.5}).abs(), {2.5});
  Tensor c = Tensor::empty({1}, {DType::Complex64});
  c.data<std::complex<float>>()[0] = {3, -4};
  const Tensor magnitude = c.abs();
  CHECK(magnitude.dtype() == DType::Float32);
  require_values(magnitude, {5});
  const Tensor roots = make(DType::Int32, {4, 9}).sqrt();
  CHECK(roots.dtype() == DType::Float32);
  require_values(roots, {2, 3});
  require_values(make(DType::Float64, {0}).exp(), {1});
  require_values(make(DType::Float64, {1}).exp().log(), {1});
  CHECK(std::isnan(make(DType::Float32, {-1}).sqrt().value_at_linear(0).real()));
  CHECK(make(DType::Float32, {0}).log().value_at_linear(0).real() == -std::numeric_limits<double>::infinity());
  CHECK_THROWS_WITH(make(DType::Bool, {1}).neg(), Contains("neg") && Contains("bool"));
}

TEST_CASE("clamp takes either bound or both, keeps NaN, and promotes integers as a scalar does") {
  const Tensor x = make(DType::Float32, {-5, 0.5, 5, std::nan("")});
  const Tensor both = x.clamp(-1, 1);
  require_values(both.slice(0, {0, 3}), {-1, 0.5, 1});
  CHECK(std::isnan(both.value_at_linear(3).real()));
  require_values(x.slice(0, {0, 3}).clamp(0, std::nullopt), {0, 0.5, 5});
  require_values(x.slice(0, {0, 3}).clamp(std::nullopt, 0), {-5, 0, 0});
  const Tensor ints = make(DType::Int64, {-3, 2, 9}).clamp(0, 5);
  CHECK(ints.dtype() == DType::Float32);
  require_values(ints, {0, 2, 5});
  CHECK_THROWS_AS(x.clamp(std::nullopt, std::nullopt), InvalidArgument);
}

TEST_CASE("comparisons give bool tensors, compare in the promoted dtype, and broadcast") {
  const Tensor a = make(DType::Int32, {1, 2, 3});
  const Tensor b = make(DType::Float32, {1, 2.5, 2});
  const Tensor equal = a == b;
  CHECK(equal.dtype() == DType::Bool);
  require_values(equal, {1, 0, 0});
  require_values(a != b, {0, 1, 1});
  require_values(a < b, {0, 1, 0});
  require_values(a <= b, {1, 1, 0});
  require_values(a > b, {0, 0, 1});
  require_values(a >= b, {1, 0, 1});
  require_values(a.gt(1.5), {0, 1, 1});
  require_values(a == 2, {0, 1, 0});
  require_values(a.le(2), {1, 1, 0});
  const Tensor grid = make(DType::Int64, {2, 1}, {1, 2}).lt(make(DType::UInt8, {1, 3}, {0, 1, 2}));
  CHECK(grid.shape() == Shape{2, 3});
  require_values(grid, {0, 0, 1, 0, 0, 0});
  CHECK((make(DType::Float32, {std::nan("")}) == make(DType::Float32, {std::nan("")})).value_at_linear(0) == 0.0);
  Tensor c = Tensor::empty({1}, {DType::Complex64});
  c.data<std::complex<float>>()[0] = {1, 1};
  require_values(c == c, {1});
  CHECK_THROWS_WITH(c < c, Contains("lt") && Contains("complex64"));
}

TEST_CASE("to(dtype) converts as PyTorch: truncation, non-zero to true, real parts, rounding to half") {
  const Tensor f = make(DType::Float32, {-1.7, 2.9, 0, 300});
  const Tensor i = f.to(DType::Int32);
  CHECK(i.dtype() == DType::Int32);
  require_values(i, {-1, 2, 0, 300});
  require_values(f.to(DType::UInt8), {255, 2, 0, 44});  // -1 and 300 wrap, as a cast through int64 does
  require_values(f.to_bool(), {1, 1, 0, 1});
  require_values(make(DType::Bool, {1, 0}).to_double(), {1, 0});
  require_values(make(DType::Int64, {1, 2}).to_float(), {1, 2});
  require_values(make(DType::Float64, {1.0 / 3}).half(), {0.333251953125});
  require_values(make(DType::Float32, {1.00390625}).bfloat16(), {1.0});  // a tie, rounded to even
  require_values(make(DType::Float32, {2.5}).to_long(), {2});
  require_values(make(DType::Int64, {70000}).to_int(), {70000});
  Tensor c = Tensor::empty({1}, {DType::Complex128});
  c.data<std::complex<double>>()[0] = {2.5, -1};
  require_values(c.to_float(), {2.5});
  CHECK(make(DType::Float32, {2}).to(DType::Complex64).value_at_linear(0) == std::complex<double>(2, 0));
  const Tensor same = make(DType::Float32, {1});
  CHECK(same.to(DType::Float32).data_ptr() == same.data_ptr());
  const Tensor t = Tensor::arange({2, 2}, 1, 1, {DType::Float64}).transpose(0, 1);
  const Tensor converted = t.to(DType::Int16);
  CHECK(converted.is_contiguous());
  require_values(converted, {1, 3, 2, 4});
}

TEST_CASE("operands on different devices, undefined operands and unsupported promotions are named") {
  CHECK_THROWS_WITH(Tensor() + make(DType::Float32, {1}), Contains("add"));
  CHECK_THROWS_WITH(make(DType::UInt16, {1}) + make(DType::Int32, {1}),
                    Contains("add of uint16[1] and int32[1]") && Contains("uint16"));
}
