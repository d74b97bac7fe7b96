// Tensor helpers behind TensorDict's tree API: squeeze, expand, view/reshape, where, masked_fill_,
// allclose and the reductions. Expected values are written out or computed by plain loops here.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor_checks.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;
using tensortree::test::require_values;

namespace {

// Element [i0, i1, ...] of a C-contiguous arange(shape, start) is start + linear index.
Tensor floats(Shape shape, double start = 1.0, double step = 1.0) {
  return Tensor::arange(std::move(shape), start, step, {DType::Float32});
}

Tensor bools(Shape shape, const std::vector<int>& values) {
  Tensor t = Tensor::empty(std::move(shape), {DType::Bool});
  auto* p = t.data<bool>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i] != 0;
  return t;
}

}  // namespace

TEST_CASE("squeeze removes a size-1 dimension, ignores other sizes, and squeeze() removes all") {
  const Tensor t = floats({2, 1, 3, 1});
  CHECK(t.squeeze(1).shape() == Shape{2, 3, 1});
  CHECK(t.squeeze(-1).shape() == Shape{2, 1, 3});
  CHECK(t.squeeze(0).shape() == Shape{2, 1, 3, 1});  // size 2: unchanged, as torch.squeeze(0)
  const Tensor all = t.squeeze();
  CHECK(all.shape() == Shape{2, 3});
  CHECK(all.data_ptr() == t.data_ptr());
  require_values(all, {1, 2, 3, 4, 5, 6});
  CHECK_THROWS_AS(t.squeeze(4), InvalidArgument);
}

TEST_CASE("expand stretches size-1 dimensions with stride 0 and adds leading ones") {
  const Tensor t = floats({3, 1}, 10);  // [[10], [11], [12]]
  const Tensor e = t.expand({2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Strides{0, 1, 0});
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) expected.push_back(10 + j);
  require_values(e, expected);
  CHECK(t.expand({-1, 5}).shape() == Shape{3, 5});
  CHECK_THROWS_AS(t.expand({4, 1}), InvalidArgument);
  CHECK_THROWS_AS(t.expand({1}), InvalidArgument);
}

TEST_CASE("view follows PyTorch's stride rule: non-contiguous tensors view where runs allow") {
  const Tensor base = floats({4, 6});
  const Tensor rows = base.slice(0, {0, 4, 2});  // rows 0 and 2: strides {12, 1}
  REQUIRE_FALSE(rows.is_contiguous());
  const Tensor split = rows.view({2, 2, 3});
  CHECK(split.data_ptr() == rows.data_ptr());
  CHECK(split.strides() == Strides{12, 3, 1});
  require_values(split, {1, 2, 3, 4, 5, 6, 13, 14, 15, 16, 17, 18});
  CHECK_FALSE(rows.try_view({12}).has_value());
  CHECK_THROWS_AS(rows.view({12}), InvalidArgument);
  const Tensor flat = rows.reshape({12});  // needs the copy view() refuses
  CHECK(flat.data_ptr() != rows.data_ptr());
  require_values(flat, {1, 2, 3, 4, 5, 6, 13, 14, 15, 16, 17, 18});
  const Tensor t = floats({2, 3}).transpose(0, 1);  // [[1,4],[2,5],[3,6]]
  require_values(t.reshape({-1}), {1, 4, 2, 5, 3, 6});
  CHECK(t.view({3, 1, 2}).strides() == Strides{1, 6, 3});  // PyTorch gives the size-1 dimension stride 6 too
}

TEST_CASE("where picks from a where cond is true and from b elsewhere, broadcasting all three") {
  const Tensor cond = bools({2, 1}, {1, 0});
  const Tensor a = floats({2, 3}, 1);     // [[1,2,3],[4,5,6]]
  const Tensor b = floats({3}, 100, 10);  // [100,110,120]
  const Tensor out = Tensor::where(cond, a, b);
  CHECK(out.shape() == Shape{2, 3});
  require_values(out, {1, 2, 3, 100, 110, 120});
  CHECK_THROWS_AS(Tensor::where(floats({2, 1}), a, b), InvalidArgument);
  CHECK_THROWS_AS(Tensor::where(cond, a, Tensor::arange({3}, 1, 1, {DType::Int32})), InvalidArgument);
  CHECK_THROWS_AS(Tensor::where(bools({3}, {1, 1, 1}), floats({2, 2}), floats({2, 2})), InvalidArgument);
}

TEST_CASE("masked_fill_ writes through a non-contiguous view with a broadcast mask") {
  const Tensor base = floats({3, 2});  // [[1,2],[3,4],[5,6]]
  const Tensor t = base.transpose(0, 1);  // [[1,3,5],[2,4,6]]
  t.masked_fill_(bools({3}, {0, 1, 0}), -7);
  require_values(base, {1, 2, -7, -7, 5, 6});
  CHECK_THROWS_AS(t.masked_fill_(bools({2}, {1, 1}), 0), InvalidArgument);  // [2] does not broadcast to [2,3]
  CHECK_THROWS_AS(t.masked_fill_(floats({3}), 0), InvalidArgument);
}

TEST_CASE("allclose uses atol + rtol * |b|, never matches NaN, and matches equal infinities") {
  const Tensor a = floats({4}, 1000);
  Tensor b = a.clone();
  b.at<float>({2}) += 0.005F;  // |diff| 0.005 <= 1e-8 + 1e-5 * 1002
  CHECK(a.allclose(b));
  b.at<float>({2}) += 0.1F;
  CHECK_FALSE(a.allclose(b));
  CHECK(a.allclose(b, 0.0, 0.2));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = floats({2});
  x.at<float>({0}) = inf;
  CHECK(x.allclose(x.clone()));
  x.at<float>({1}) = nan;
  CHECK_FALSE(x.allclose(x.clone()));
  CHECK(floats({2, 3}).allclose(floats({3}).expand({2, 3}).clone(), 0, 3.0));
  CHECK_THROWS_AS(a.allclose(Tensor::arange({4}, 1000, 1, {DType::Float64})), InvalidArgument);
}

TEST_CASE("sum, mean, amin and amax reduce one dimension element by element") {
  // t[i][j][k] = 1 + 12 i + 4 j + k, viewed through a permute so that the source is strided.
  const Tensor t = floats({2, 3, 4}).permute({0, 1, 2});
  const Tensor p = floats({3, 2, 4}).permute({1, 0, 2});  // p[i][j][k] = 1 + 8 j + 4 i + k
  REQUIRE_FALSE(p.is_contiguous());
  std::vector<double> sum1, mean1, min1, max1;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      double s = 0, lo = 1e9, hi = -1e9;
      for (int j = 0; j < 3; ++j) {
        const double v = 1 + 8 * j + 4 * i + k;
        s += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      sum1.push_back(s);
      mean1.push_back(s / 3);
      min1.push_back(lo);
      max1.push_back(hi);
    }
  CHECK(p.sum(1).shape() == Shape{2, 4});
  require_values(p.sum(1), sum1);
  require_values(p.mean(1), mean1);
  require_values(p.amin(1), min1);
  require_values(p.amax(-2), max1);
  CHECK(p.sum(1, true).shape() == Shape{2, 1, 4});
  std::vector<double> sum0;
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k) sum0.push_back((1 + 4 * j + k) + (13 + 4 * j + k));
  require_values(t.sum(0), sum0);
  CHECK_THROWS_AS(t.sum(3), InvalidArgument);
}

TEST_CASE("reductions follow torch's dtypes: integer sums are int64, mean needs floats") {
  const Tensor ints = Tensor::arange({2, 3}, 1, 1, {DType::Int32});
  const Tensor s = ints.sum(1);
  CHECK(s.dtype() == DType::Int64);
  require_values(s, {6, 15});
  CHECK(ints.amax(0).dtype() == DType::Int32);
  require_values(ints.amax(0), {4, 5, 6});
  CHECK_THROWS_AS(ints.mean(0), InvalidArgument);
  const Tensor flags = bools({2, 3}, {1, 0, 1, 1, 1, 1});
  require_values(flags.sum(1), {2, 3});
  CHECK_THROWS_AS(Tensor::zeros({2}, {DType::Complex64}).amax(0), NotSupported);
  CHECK_THROWS_AS(floats({0, 2}).amin(0), InvalidArgument);
  Tensor nan = floats({3});
  nan.at<float>({1}) = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(nan.amax(0).value_at_linear(0).real()));
  CHECK(std::isnan(nan.amin(0).value_at_linear(0).real()));
}
