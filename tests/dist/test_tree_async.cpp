// TensorTree's asynchronous collectives (broadcast_async, all_gather_async, gather_async,
// scatter_async, reduce_async, all_reduce_async): values depend on the contributing rank and on the
// element, and every element of every leaf is checked, with two collectives in flight at once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops_test_support.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

constexpr std::int64_t kRows = 3;

// Leaf values for `rank`: distinct per leaf, rank and element, never zero, exact in float32.
ValueAt leaf_values(int rank, int leaf) {
  return [rank, leaf](std::int64_t i) { return rank_value(rank, i + 100 * leaf); };
}

// A small nested tree (three dtypes, a nested node) holding `rank`'s values.
TensorTree tree_of(int rank) {
  return TensorTree({kRows}, {{"obs", make_tensor({kRows, 4}, DType::Float32, leaf_values(rank, 0))},
                              {"action", make_tensor({kRows}, DType::Int64, leaf_values(rank, 1))},
                              {"next.reward", make_tensor({kRows, 2}, DType::Float64, leaf_values(rank, 2))}});
}

// Every leaf of `tree` holds `value(leaf)`'s values, element by element.
void check_tree(const TensorTree& tree, const std::function<ValueAt(int)>& value) {
  REQUIRE(tree.contains("obs"));
  REQUIRE(tree.contains("action"));
  REQUIRE(tree.contains("next.reward"));
  // Compared with "" so that a failure prints which element differs.
  CHECK(mismatch(tree.get("obs"), DType::Float32, {kRows, 4}, value(0)) == "");
  CHECK(mismatch(tree.get("action"), DType::Int64, {kRows}, value(1)) == "");
  CHECK(mismatch(tree.get("next.reward"), DType::Float64, {kRows, 2}, value(2)) == "");
}

void check_tree_of(const TensorTree& tree, int rank) {
  INFO("expected rank " << rank << "'s values");
  check_tree(tree, [rank](int leaf) { return leaf_values(rank, leaf); });
}

}  // namespace

TEST_CASE("tree async: broadcast_async delivers the source's tree into existing and empty trees", "[tree]") {
  for_each_group([](const Group& group) {
    const int src = last_rank(group);
    TensorTree mine = tree_of(group.rank());
    TensorTree fresh;
    const WorkPtr into_existing = mine.broadcast_async(src, group);
    if (group.rank() == src) fresh = tree_of(src);
    const WorkPtr into_empty = fresh.broadcast_async(src, group);  // two in flight at once
    into_empty->wait();
    into_existing->wait();
    check_tree_of(mine, src);
    check_tree_of(fresh, src);
  });
}

TEST_CASE("tree async: all_gather_async and gather_async in flight together", "[tree]") {
  for_each_group([](const Group& group) {
    const int dst = last_rank(group);
    const TensorTree mine = tree_of(group.rank());
    Pending<std::vector<TensorTree>> everyone = mine.all_gather_async(group);
    Pending<std::vector<TensorTree>> at_dst = mine.gather_async(dst, group);
    // Moving a Pending keeps its result valid.
    Pending<std::vector<TensorTree>> moved = std::move(at_dst);
    const std::vector<TensorTree>& gathered = moved.get();
    const std::vector<TensorTree>& all = everyone.get();
    REQUIRE(all.size() == static_cast<std::size_t>(group.size()));
    for (int r = 0; r < group.size(); ++r) check_tree_of(all[static_cast<std::size_t>(r)], r);
    if (group.rank() == dst) {
      REQUIRE(gathered.size() == static_cast<std::size_t>(group.size()));
      for (int r = 0; r < group.size(); ++r) check_tree_of(gathered[static_cast<std::size_t>(r)], r);
    } else {
      CHECK(gathered.empty());
    }
  });
}

TEST_CASE("tree async: scatter_async gives each rank its own tree", "[tree]") {
  for_each_group([](const Group& group) {
    const int src = last_rank(group);
    std::vector<TensorTree> trees;
    if (group.rank() == src) {
      // Tree r carries values of rank r + 10, so that no rank's own values could pass by accident.
      for (int r = 0; r < group.size(); ++r) trees.push_back(tree_of(r + 10));
    }
    TensorTree received;
    TensorTree into_existing = tree_of(group.rank());
    const WorkPtr first = received.scatter_async(src, trees, group);
    const WorkPtr second = into_existing.scatter_async(src, trees, group);
    second->wait();
    first->wait();
    check_tree_of(received, group.rank() + 10);
    check_tree_of(into_existing, group.rank() + 10);
  });
}

TEST_CASE("tree async: all_reduce_async and reduce_async in flight together", "[tree]") {
  for_each_group([](const Group& group) {
    const int dst = last_rank(group);
    const int n = group.size();
    TensorTree summed = tree_of(group.rank());
    TensorTree maxed = tree_of(group.rank());
    // Not consolidated: the reduction packs it and unpacks the result into the leaves.
    TensorTree reduced_at_dst = tree_of(group.rank());
    const WorkPtr sum = summed.all_reduce_async(group, ReduceOp::Sum);
    const WorkPtr max = maxed.all_reduce_async(group, ReduceOp::Max);
    const WorkPtr to_dst = reduced_at_dst.reduce_async(dst, group, ReduceOp::Sum);
    to_dst->wait();
    max->wait();
    sum->wait();
    const auto total = [n](int leaf) -> ValueAt {
      return [n, leaf](std::int64_t i) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += rank_value(r, i + 100 * leaf);
        return sum;
      };
    };
    const auto highest = [n](int leaf) -> ValueAt {
      return [n, leaf](std::int64_t i) {
        double best = rank_value(0, i + 100 * leaf);
        for (int r = 1; r < n; ++r) best = std::max(best, rank_value(r, i + 100 * leaf));
        return best;
      };
    };
    check_tree(summed, total);
    check_tree(maxed, highest);
    if (group.rank() == dst) {
      check_tree(reduced_at_dst, total);
    } else {
      check_tree_of(reduced_at_dst, group.rank());  // unchanged
    }
  });
}

TEST_CASE("tree async: a wrong dst is rejected before anything is posted", "[tree]") {
  const Group& world = context().world();
  TensorTree mine = tree_of(world.rank());
  CHECK_THAT(error_of<InvalidArgument>([&] { (void)mine.reduce_async(world.size(), world); }), Catch::Contains("dst"));
  CHECK_THAT(error_of<InvalidArgument>([&] { (void)mine.gather_async(-1, world); }), Catch::Contains("dst"));
  CHECK_THAT(error_of<InvalidArgument>([&] { (void)mine.broadcast_async(world.size() + 2, world); }), Catch::Contains("src"));
}
