// Element-wise arithmetic on trees, leaf by leaf (Tensor's rules, tested in test_tensor_arith.cpp),
// with values worked out by hand. The trees: batch_size [2];
//   obs         float32 [2,2]  obs(i,j) = base + 2i + j
//   next.reward int64   [2]    rew(i)   = 10 * (base + i)
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;
using Catch::Matchers::Contains;

namespace {

TensorTree make_tree(double base) {
  return TensorTree::from_map({2}, {{"obs", Tensor::arange({2, 2}, base, 1, {DType::Float32})},
                                    {"next.reward", Tensor::arange({2}, 10 * base, 10, {DType::Int64})}});
}

void require_leaf(const TensorTree& tree, const std::string& key, DType dtype, const std::vector<double>& expected) {
  INFO("leaf " << key);
  const Tensor& leaf = tree.get(key);
  REQUIRE(leaf.dtype() == dtype);
  REQUIRE(leaf.numel() == static_cast<std::int64_t>(expected.size()));
  for (std::int64_t i = 0; i < leaf.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(leaf.value_at_linear(i).real() == expected[static_cast<std::size_t>(i)]);
  }
}

}  // namespace

TEST_CASE("tree op tree pairs leaves by key and keeps the left tree's batch_size") {
  const TensorTree a = make_tree(1);  // obs 1 2 3 4, reward 10 20
  const TensorTree b = make_tree(5);  // obs 5 6 7 8, reward 50 60
  const TensorTree sum = a + b;
  CHECK(sum.batch_size() == Shape{2});
  require_leaf(sum, "obs", DType::Float32, {6, 8, 10, 12});
  require_leaf(sum, "next.reward", DType::Int64, {60, 80});
  require_leaf(b - a, "obs", DType::Float32, {4, 4, 4, 4});
  require_leaf(a * b, "next.reward", DType::Int64, {500, 1200});
  require_leaf(b / a, "next.reward", DType::Float32, {5, 3});  // true division
  require_leaf(a.lt(b), "obs", DType::Bool, {1, 1, 1, 1});
  require_leaf(a.eq(a), "next.reward", DType::Bool, {1, 1});
}

TEST_CASE("tree op scalar applies to every leaf, on either side") {
  const TensorTree a = make_tree(1);
  require_leaf(a * 2, "obs", DType::Float32, {2, 4, 6, 8});
  require_leaf(a * 2, "next.reward", DType::Int64, {20, 40});  // an integer scalar keeps an integer leaf's dtype
  require_leaf(a * 2.0, "next.reward", DType::Float32, {20, 40});  // a floating one gives float32
  require_leaf(5 - a, "next.reward", DType::Int64, {-5, -15});
  require_leaf(a / 4, "next.reward", DType::Float32, {2.5, 5});  // true division
  require_leaf(10 - a, "obs", DType::Float32, {9, 8, 7, 6});
  require_leaf(8 / a, "obs", DType::Float32, {8, 4, static_cast<float>(8.0 / 3), 2});
  require_leaf(a + 0.5, "obs", DType::Float32, {1.5, 2.5, 3.5, 4.5});
  require_leaf(a / 4, "obs", DType::Float32, {0.25, 0.5, 0.75, 1});
  require_leaf(a.gt(15), "next.reward", DType::Bool, {0, 1});
  require_leaf(-a, "next.reward", DType::Int64, {-10, -20});
  require_leaf((a - 3).abs(), "obs", DType::Float32, {2, 1, 0, 1});
  require_leaf(a.clamp(2, 3), "obs", DType::Float32, {2, 2, 3, 3});
  require_leaf(a.sqrt(), "next.reward", DType::Float32, {std::sqrt(10.0f), std::sqrt(20.0f)});
}

TEST_CASE("in-place tree forms write into the leaves and name the leaf that refuses") {
  const TensorTree a = make_tree(1);
  const Tensor obs = a.get("obs");
  a += make_tree(5);
  CHECK(a.get("obs").data_ptr() == obs.data_ptr());
  require_leaf(a, "obs", DType::Float32, {6, 8, 10, 12});
  require_leaf(a, "next.reward", DType::Int64, {60, 80});
  a.mul_(make_tree(0));  // obs 0 1 2 3, reward 0 10
  require_leaf(a, "obs", DType::Float32, {0, 8, 20, 36});
  require_leaf(a, "next.reward", DType::Int64, {0, 800});
  const TensorTree floats = make_tree(1).to(DType::Float64);
  floats -= 1;
  floats /= 2;
  require_leaf(floats, "next.reward", DType::Float64, {4.5, 9.5});
  const TensorTree ints = make_tree(1);
  ints += 3;
  require_leaf(ints, "next.reward", DType::Int64, {13, 23});
  CHECK_THROWS_AS(make_tree(1) += 0.5, InvalidArgument);
  CHECK_THROWS_WITH(make_tree(1) += 0.5, Contains("next.reward") && Contains("int64"));
}

TEST_CASE("a key missing on either side is an error naming it") {
  const TensorTree a = make_tree(1);
  TensorTree b = make_tree(2);
  b.set("extra", Tensor::zeros({2}));
  CHECK_THROWS_AS(a + b, InvalidArgument);
  CHECK_THROWS_WITH(a + b, Contains("extra") && Contains("add"));
  CHECK_THROWS_WITH(b.mul(a), Contains("extra"));
  CHECK_THROWS_WITH(a.sub_(b), Contains("extra"));
  const TensorTree other_batch = TensorTree::from_map({1}, {{"obs", Tensor::zeros({1, 2})},
                                                            {"next.reward", Tensor::zeros({1}, {DType::Int64})}});
  CHECK_THROWS_AS(a + other_batch, InvalidArgument);
}

TEST_CASE("to(dtype) and its named forms convert every leaf") {
  const TensorTree a = make_tree(1);
  const TensorTree h = a.half();
  require_leaf(h, "obs", DType::Float16, {1, 2, 3, 4});
  require_leaf(h, "next.reward", DType::Float16, {10, 20});
  require_leaf(a.to_long(), "obs", DType::Int64, {1, 2, 3, 4});
  require_leaf(a.to_float(), "next.reward", DType::Float32, {10, 20});
  require_leaf(a.to_bool(), "obs", DType::Bool, {1, 1, 1, 1});
  CHECK(a.to_double().batch_size() == Shape{2});
}
