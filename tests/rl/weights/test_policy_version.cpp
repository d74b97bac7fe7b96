// Versions carried by data: stamping trajectories, dropping rows that lag too far, the lag reported.
#include <catch2/catch.hpp>

#include "tensortree/error.hpp"
#include "tensortree/policy_version.hpp"

using namespace tensortree;

namespace {

// Six rows of two steps; "obs" row r holds 100 * r + element.
TensorTree trajectory() {
  TensorTree tree(Shape{6, 2});
  tree.set("obs", Tensor::arange({6, 2, 3}, 0, 1, {DType::Float32}));
  tree.set("next.reward", Tensor::arange({6, 2}, 1, 1, {DType::Float64}));
  return tree;
}

}  // namespace

TEST_CASE("stamp_policy_version writes the version into every element of a batch-shaped int64 leaf") {
  TensorTree tree = trajectory();
  stamp_policy_version(tree, 17);
  const Tensor& stamp = tree.get(kPolicyVersionKey);
  REQUIRE(stamp.dtype() == DType::Int64);
  REQUIRE(stamp.shape() == Shape{6, 2});
  for (std::int64_t i = 0; i < stamp.numel(); ++i) REQUIRE(stamp.data<std::int64_t>()[i] == 17);
  stamp_policy_version(tree, 18, "meta.version");
  REQUIRE(tree.get("meta.version").data<std::int64_t>()[11] == 18);
  REQUIRE_THROWS_AS(stamp_policy_version(tree, -1), InvalidArgument);
}

TEST_CASE("drop_stale_rows keeps the rows within max_lag and reports the lag of all") {
  TensorTree tree = trajectory();
  stamp_policy_version(tree, 0);
  // Row r acted with version 10 - r; row 3's second step with version 9 (its oldest is 7).
  std::int64_t* versions = tree.get(kPolicyVersionKey).data<std::int64_t>();
  for (std::int64_t r = 0; r < 6; ++r) versions[2 * r] = versions[2 * r + 1] = 10 - r;
  versions[2 * 3 + 1] = 9;
  const FreshRows fresh = drop_stale_rows(tree, 10, 2);
  REQUIRE(fresh.lag.rows == 6);
  REQUIRE(fresh.lag.dropped == 3);
  REQUIRE(fresh.lag.max_lag == 5);
  REQUIRE(fresh.lag.mean_lag == Approx((0 + 1 + 2 + 3 + 4 + 5) / 6.0));
  REQUIRE(fresh.rows.batch_size() == Shape{3, 2});
  const Tensor& obs = fresh.rows.get("obs");
  for (std::int64_t i = 0; i < obs.numel(); ++i) REQUIRE(obs.data<float>()[i] == static_cast<float>(i));
  const Tensor& reward = fresh.rows.get("next.reward");
  for (std::int64_t i = 0; i < reward.numel(); ++i) REQUIRE(reward.data<double>()[i] == static_cast<double>(i + 1));
  REQUIRE(fresh.rows.get(kPolicyVersionKey).data<std::int64_t>()[5] == 8);

  const FreshRows all = drop_stale_rows(tree, 10, 5);
  REQUIRE(all.lag.dropped == 0);
  REQUIRE(all.rows.batch_size() == Shape{6, 2});
  REQUIRE(all.rows.get("obs").data_ptr() == tree.get("obs").data_ptr());
}

TEST_CASE("drop_stale_rows refuses versions from the future, negative ones and a missing stamp") {
  TensorTree tree = trajectory();
  stamp_policy_version(tree, 4);
  REQUIRE_THROWS_WITH(drop_stale_rows(tree, 3, 1), Catch::Contains("row 0 holds policy versions 4 to 4"));
  tree.get(kPolicyVersionKey).data<std::int64_t>()[7] = -2;
  REQUIRE_THROWS_WITH(drop_stale_rows(tree, 9, 1), Catch::Contains("row 3"));
  REQUIRE_THROWS_AS(drop_stale_rows(trajectory(), 9, 1), InvalidArgument);
  REQUIRE_THROWS_AS(drop_stale_rows(tree, 9, -1), InvalidArgument);
}
