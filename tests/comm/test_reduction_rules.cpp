// The reduction rules every backend shares: which dtypes an op refuses, what a bool reduction
// means, and AVG's final division (truncating for integers, exact for floats and complex).
#include <catch2/catch.hpp>

#include <complex>
#include <cstdint>

#include "comm/reduction_rules.hpp"
#include "tensortree/error.hpp"
#include "tensortree/float_types.hpp"

using namespace tensortree;
using namespace tensortree::detail;

TEST_CASE("the rules refuse bitwise floats, ordered complex values and the average of bools") {
  CHECK_FALSE(reduction_refusal(DType::Float32, ReduceOp::BitwiseAnd).empty());
  CHECK_FALSE(reduction_refusal(DType::Complex64, ReduceOp::Max).empty());
  CHECK_FALSE(reduction_refusal(DType::Bool, ReduceOp::Avg).empty());
  CHECK(reduction_refusal(DType::Int16, ReduceOp::BitwiseXor).empty());
  CHECK(reduction_refusal(DType::Bool, ReduceOp::BitwiseOr).empty());
  CHECK(reduction_refusal(DType::Complex128, ReduceOp::Avg).empty());
  CHECK(reduction_refusal(DType::Float8_e5m2, ReduceOp::Min).empty());
}

TEST_CASE("a bool reduction is any, all or parity") {
  CHECK(logical_reduction(ReduceOp::Sum) == LogicalReduction::Any);
  CHECK(logical_reduction(ReduceOp::Max) == LogicalReduction::Any);
  CHECK(logical_reduction(ReduceOp::Product) == LogicalReduction::All);
  CHECK(logical_reduction(ReduceOp::BitwiseAnd) == LogicalReduction::All);
  CHECK(logical_reduction(ReduceOp::BitwiseXor) == LogicalReduction::Parity);
  CHECK_THROWS_AS(logical_reduction(ReduceOp::Avg), InvalidArgument);
  CHECK(combining_op(ReduceOp::Avg) == ReduceOp::Sum);
  CHECK(combining_op(ReduceOp::Min) == ReduceOp::Min);
}

TEST_CASE("AVG divides integers with truncation toward zero") {
  Tensor signed_sum = Tensor::empty({3}, {DType::Int8});
  auto* s = static_cast<std::int8_t*>(signed_sum.data_ptr());
  s[0] = 7;
  s[1] = -7;
  s[2] = 120;
  divide_in_place(signed_sum, 4);
  CHECK(s[0] == 1);
  CHECK(s[1] == -1);
  CHECK(s[2] == 30);

  Tensor unsigned_sum = Tensor::empty({1}, {DType::UInt64});
  *static_cast<std::uint64_t*>(unsigned_sum.data_ptr()) = 0xFFFFFFFFFFFFFFFFull;
  divide_in_place(unsigned_sum, 3);
  CHECK(*static_cast<std::uint64_t*>(unsigned_sum.data_ptr()) == 0x5555555555555555ull);
}

TEST_CASE("AVG divides floating-point, half-precision and complex values") {
  Tensor floats = Tensor::empty({1}, {DType::Float64});
  *static_cast<double*>(floats.data_ptr()) = 7.0;
  divide_in_place(floats, 2);
  CHECK(*static_cast<double*>(floats.data_ptr()) == 3.5);

  Tensor halves = Tensor::empty({1}, {DType::BFloat16});
  *static_cast<BFloat16*>(halves.data_ptr()) = BFloat16(6.0f);
  divide_in_place(halves, 4);
  CHECK(static_cast<float>(*static_cast<BFloat16*>(halves.data_ptr())) == 1.5f);

  Tensor complex = Tensor::empty({1}, {DType::Complex64});
  *static_cast<std::complex<float>*>(complex.data_ptr()) = {3.0f, -9.0f};
  divide_in_place(complex, 3);
  CHECK(*static_cast<std::complex<float>*>(complex.data_ptr()) == std::complex<float>(1.0f, -3.0f));

  Tensor bools = Tensor::empty({1}, {DType::Bool});
  CHECK_THROWS_AS(divide_in_place(bools, 2), NotSupported);
}
