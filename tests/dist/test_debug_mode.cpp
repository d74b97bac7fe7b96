// Debug mode (TENSORTREE_DISTRIBUTED_DEBUG=DETAIL): mismatched collectives that MPI cannot see are
// InvalidArgument on every rank, naming the ranks that differ; a rank that rejects its own
// arguments does not leave the others waiting; the group stays usable afterwards.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "dist_support.hpp"
#include "ops_test_support.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

constexpr const char* kVariable = "TENSORTREE_DISTRIBUTED_DEBUG";

// Sets the variable for one test case on this rank (every rank runs the same case).
class DebugSetting {
 public:
  explicit DebugSetting(const char* value) { ::setenv(kVariable, value, 1); }
  DebugSetting(const DebugSetting&) = delete;
  DebugSetting& operator=(const DebugSetting&) = delete;
  ~DebugSetting() { ::unsetenv(kVariable); }
};

const Shape kShape{3, 5};

Tensor rank_tensor(Shape shape, DType dtype = DType::Float32) {
  return make_tensor(std::move(shape), dtype, values_of(world_rank()));
}

// After a refused call the group must still carry a correct all_reduce.
void check_group_still_works(const Group& group) {
  Tensor tensor = rank_tensor(kShape);
  dist::all_reduce(tensor, group);
  const ValueAt sum = [&](std::int64_t i) {
    double total = 0;
    for (int r = 0; r < group.size(); ++r) total += rank_value(r, i);
    return total;
  };
  CHECK(mismatch(tensor, DType::Float32, kShape, sum) == "");
}

int last_rank() { return world_size() - 1; }

}  // namespace

TEST_CASE("debug mode: matching collectives give the usual results", "[debug]") {
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  check_group_still_works(world);
  Tensor tensor = rank_tensor(kShape, DType::Int64);
  dist::broadcast(tensor, last_rank(), world);
  CHECK(mismatch(tensor, DType::Int64, kShape, values_of(last_rank())) == "");
}

// The last rank's tensor differs from the others' in `shape` or `dtype`: every rank's all_reduce
// must fail naming the field and the last rank's value.
void check_one_rank_differs(const Shape& shape, DType dtype, const std::string& field, const std::string& value) {
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  const bool odd_one = world_rank() == last_rank();
  Tensor tensor = rank_tensor(odd_one ? shape : kShape, odd_one ? dtype : DType::Float32);
  CHECK_THROWS_WITH(dist::all_reduce(tensor, world),
                    Catch::Contains(field + ":") && Catch::Contains(value + " on rank " + std::to_string(last_rank())));
  check_group_still_works(world);
}

TEST_CASE("debug mode: a shape that differs on one rank fails every rank", "[debug]") {
  check_one_rank_differs({4, 5}, DType::Float32, "shape", "[4, 5]");
}

TEST_CASE("debug mode: dtypes of equal size that differ fail every rank", "[debug]") {
  check_one_rank_differs(kShape, DType::Int32, "dtype", "int32");
}

TEST_CASE("debug mode: ranks naming different roots fail every rank", "[debug]") {
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  Tensor tensor = rank_tensor(kShape);
  const int root = world_rank() == 0 ? 0 : 1;
  CHECK_THROWS_WITH(dist::broadcast(tensor, root, world), Catch::Contains("root: 0 on rank 0"));
  CHECK(mismatch(tensor, DType::Float32, kShape, values_of(world_rank())) == "");  // untouched
  check_group_still_works(world);
}

TEST_CASE("debug mode: broadcast against all_reduce fails every rank", "[debug]") {
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  Tensor tensor = rank_tensor(kShape);
  const auto call = [&] {
    if (world_rank() == last_rank()) {
      dist::broadcast(tensor, 0, world);
    } else {
      dist::all_reduce(tensor, world);
    }
  };
  CHECK_THROWS_WITH(call(), Catch::Contains("operation:") &&
                                Catch::Contains("broadcast on rank " + std::to_string(last_rank())));
  check_group_still_works(world);
}

TEST_CASE("debug mode: different reductions fail every rank", "[debug]") {
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  Tensor tensor = rank_tensor(kShape);
  const ReduceOp op = world_rank() == 0 ? ReduceOp::Max : ReduceOp::Sum;
  CHECK_THROWS_WITH(dist::all_reduce(tensor, world, op), Catch::Contains("reduction:"));
  check_group_still_works(world);
}

TEST_CASE("debug mode: a rank that rejects its own arguments does not leave the others waiting", "[debug]") {
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  Tensor tensor = rank_tensor(kShape);
  const int root = world_rank() == last_rank() ? world_size() : 0;  // outside the group on one rank
  if (world_rank() == last_rank()) {
    CHECK_THROWS_WITH(dist::broadcast(tensor, root, world), Catch::Contains("outside the group"));
  } else {
    CHECK_THROWS_WITH(dist::broadcast(tensor, root, world),
                      Catch::Contains("rank " + std::to_string(last_rank()) + " rejected its own arguments"));
  }
  check_group_still_works(world);
}

TEST_CASE("debug mode: a misspelt setting is InvalidArgument, not silently off", "[debug]") {
  const DebugSetting typo("DETIAL");
  Tensor tensor = rank_tensor(kShape);
  CHECK_THROWS_AS(dist::all_reduce(tensor, context().world()), InvalidArgument);
}

TEST_CASE("debug mode: GroupOptions::debug_checks turns it on for one group without the variable", "[debug]") {
  const Group& world = context().world();
  const Group checked = context().new_group(world.world_ranks(), GroupOptions{.debug_checks = true});
  Tensor tensor = rank_tensor(world_rank() == last_rank() ? Shape{2, 5} : kShape);
  CHECK_THROWS_WITH(dist::all_reduce(tensor, checked), Catch::Contains("[2, 5] on rank " + std::to_string(last_rank())));
  check_group_still_works(checked);
  // A matching call on the checked group gives the usual result; the world is unchecked.
  CHECK_FALSE(world.options().debug_checks);
  check_group_still_works(world);
}

TEST_CASE("debug mode: tree collectives with different roots or operations fail every rank", "[debug]") {
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  TensorTree tree(Shape{3});
  tree.set({"obs", "pixels"}, rank_tensor({3, 4}));
  tree.set("reward", rank_tensor({3}, DType::Int64));
  const int root = world_rank() == 0 ? 0 : 1;
  CHECK_THROWS_WITH(tree.broadcast(root, world), Catch::Contains("root: 0 on rank 0"));
  CHECK(mismatch(tree.get({"obs", "pixels"}), DType::Float32, {3, 4}, values_of(world_rank())) == "");
  const auto call = [&] {
    if (world_rank() == last_rank()) {
      tree.all_reduce(world);
    } else {
      tree.broadcast(0, world);
    }
  };
  CHECK_THROWS_WITH(call(), Catch::Contains("tree all_reduce on rank " + std::to_string(last_rank())));
  check_group_still_works(world);
  tree.all_reduce(world, ReduceOp::Max);  // matching calls still give the usual result
  CHECK(mismatch(tree.get("reward"), DType::Int64, {3}, values_of(last_rank())) == "");
}

TEST_CASE("debug mode: a send of float64 into a float32 receiver of equal bytes fails the receiver, naming both",
          "[debug]") {
  if (world_size() < 2) return;
  const DebugSetting detail("DETAIL");
  const Group& world = context().world();
  const int receiver = last_rank();
  if (world_rank() == 0) {
    dist::send(rank_tensor({3, 5}, DType::Float64), receiver, world, {.tag = 7});
  } else if (world_rank() == receiver) {
    Tensor landing = Tensor::zeros({6, 5}, {DType::Float32});
    CHECK_THROWS_WITH(dist::recv(landing, 0, world, {.tag = 7}),
                      Catch::Contains("rank 0 sent float64 [3, 5] (120 bytes) but this rank receives into float32 "
                                      "[6, 5] (120 bytes)"));
  }
  // A matching pair then moves its values as usual.
  if (world_rank() == 0) {
    dist::send(rank_tensor(kShape), receiver, world, {.tag = 8});
  } else if (world_rank() == receiver) {
    Tensor landing = Tensor::zeros(kShape, {DType::Float32});
    dist::recv(landing, 0, world, {.tag = 8});
    CHECK(mismatch(landing, DType::Float32, kShape, values_of(0)) == "");
  }
  check_group_still_works(world);
}
