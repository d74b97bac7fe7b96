// combine_into: the elementwise step of the reductions a backend computes itself, for every dtype
// and operation the reduction rules allow.
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "comm/combine.hpp"
#include "comm/reduction_rules.hpp"
#include "tensortree/error.hpp"
#include "tensortree/float_types.hpp"

using namespace tensortree;
using tensortree::detail::combine_into;

namespace {

template <class T>
Tensor of(std::vector<T> values) {
  Tensor out = Tensor::empty({static_cast<std::int64_t>(values.size())}, {dtype_v<T>});
  for (std::size_t i = 0; i < values.size(); ++i) out.data<T>()[i] = values[i];
  return out;
}

template <class T>
std::vector<T> values_of(const Tensor& tensor) {
  return std::vector<T>(tensor.data<T>(), tensor.data<T>() + tensor.numel());
}

template <class T>
std::vector<T> combined(std::vector<T> a, std::vector<T> b, ReduceOp op) {
  const Tensor accumulated = of(std::move(a));
  combine_into(accumulated, of(std::move(b)), op);
  return values_of<T>(accumulated);
}

}  // namespace

TEST_CASE("combine_into sums, multiplies and takes the min and max of integers, wrapping on overflow") {
  using V = std::vector<std::int32_t>;
  CHECK(combined<std::int32_t>({1, -2, 7}, {10, 5, -3}, ReduceOp::Sum) == V{11, 3, 4});
  CHECK(combined<std::int32_t>({2, -2, 7}, {10, 5, -3}, ReduceOp::Product) == V{20, -10, -21});
  CHECK(combined<std::int32_t>({2, -2, 7}, {10, 5, -3}, ReduceOp::Min) == V{2, -2, -3});
  CHECK(combined<std::int32_t>({2, -2, 7}, {10, 5, -3}, ReduceOp::Max) == V{10, 5, 7});
  CHECK(combined<std::int32_t>({std::numeric_limits<std::int32_t>::max()}, {1}, ReduceOp::Sum) ==
        V{std::numeric_limits<std::int32_t>::min()});
  CHECK(combined<std::uint8_t>({250, 3}, {10, 4}, ReduceOp::Sum) == std::vector<std::uint8_t>{4, 7});
  // 16- and 8-bit integers multiply without passing through (signed) int, where these overflow.
  CHECK(combined<std::int16_t>({-1, -300, 181}, {-1, 300, 181}, ReduceOp::Product) ==
        std::vector<std::int16_t>{1, -24464, 32761});
  CHECK(combined<std::uint16_t>({0xFFFF, 300}, {0xFFFF, 300}, ReduceOp::Product) ==
        std::vector<std::uint16_t>{1, 24464});
  CHECK(combined<std::int8_t>({-128, 16}, {-1, 16}, ReduceOp::Product) == std::vector<std::int8_t>{-128, 0});
  // AVG combines as SUM; the division is the caller's last step.
  CHECK(combined<std::int64_t>({3, 4}, {5, 6}, ReduceOp::Avg) == std::vector<std::int64_t>{8, 10});
}

TEST_CASE("combine_into applies the bitwise operations to integers and reduces bools logically") {
  using V = std::vector<std::uint16_t>;
  CHECK(combined<std::uint16_t>({0b1100, 0xff00}, {0b1010, 0x0ff0}, ReduceOp::BitwiseAnd) == V{0b1000, 0x0f00});
  CHECK(combined<std::uint16_t>({0b1100, 0xff00}, {0b1010, 0x0ff0}, ReduceOp::BitwiseOr) == V{0b1110, 0xfff0});
  CHECK(combined<std::uint16_t>({0b1100, 0xff00}, {0b1010, 0x0ff0}, ReduceOp::BitwiseXor) == V{0b0110, 0xf0f0});
  using B = std::vector<bool>;
  const auto logical = [](ReduceOp op) {
    const std::vector<bool> got = [&] {
      const Tensor a = Tensor::empty({4}, {DType::Bool});
      const Tensor b = Tensor::empty({4}, {DType::Bool});
      const bool left[] = {false, false, true, true};
      const bool right[] = {false, true, false, true};
      for (int i = 0; i < 4; ++i) {
        a.data<bool>()[i] = left[i];
        b.data<bool>()[i] = right[i];
      }
      combine_into(a, b, op);
      return std::vector<bool>(a.data<bool>(), a.data<bool>() + 4);
    }();
    return got;
  };
  CHECK(logical(ReduceOp::Sum) == B{false, true, true, true});
  CHECK(logical(ReduceOp::Max) == B{false, true, true, true});
  CHECK(logical(ReduceOp::Product) == B{false, false, false, true});
  CHECK(logical(ReduceOp::Min) == B{false, false, false, true});
  CHECK(logical(ReduceOp::BitwiseXor) == B{false, true, true, false});
}

TEST_CASE("combine_into lets NaN win MIN and MAX, and reduces half floats and complex numbers") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> low = combined<double>({nan, 1.0, 2.0}, {0.0, nan, -1.0}, ReduceOp::Min);
  CHECK(std::isnan(low[0]));
  CHECK(std::isnan(low[1]));
  CHECK(low[2] == -1.0);
  CHECK(combined<double>({1.5, -2.0}, {2.0, 3.0}, ReduceOp::Max) == std::vector<double>{2.0, 3.0});
  const std::vector<Half> halves = combined<Half>({Half(1.5f), Half(2.0f)}, {Half(0.25f), Half(3.0f)}, ReduceOp::Product);
  CHECK(static_cast<float>(halves[0]) == 0.375f);
  CHECK(static_cast<float>(halves[1]) == 6.0f);
  const std::vector<BFloat16> sums = combined<BFloat16>({BFloat16(1.0f)}, {BFloat16(2.0f)}, ReduceOp::Sum);
  CHECK(static_cast<float>(sums[0]) == 3.0f);
  using C = std::complex<float>;
  CHECK(combined<C>({C(1, 2)}, {C(3, -1)}, ReduceOp::Product) == std::vector<C>{C(5, 5)});
}

TEST_CASE("combine_into refuses what the reduction rules refuse and operands that differ") {
  using C = std::complex<double>;
  CHECK_THROWS_AS(combine_into(of<C>({C(1, 1)}), of<C>({C(2, 2)}), ReduceOp::Max), NotSupported);
  CHECK_THROWS_AS(combine_into(of<float>({1.0f}), of<float>({2.0f}), ReduceOp::BitwiseOr), NotSupported);
  CHECK_THROWS_WITH(combine_into(of<float>({1.0f, 2.0f}), of<float>({1.0f}), ReduceOp::Sum),
                    Catch::Contains("float32 of 2 elements") && Catch::Contains("float32 of 1 elements"));
  CHECK_THROWS_AS(combine_into(of<float>({1.0f}), of<double>({1.0}), ReduceOp::Sum), InvalidArgument);
}
