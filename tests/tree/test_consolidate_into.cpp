// consolidate_into(): the steady-state refresh of a consolidated tree in place, and the fallback to
// a new buffer whenever the refresh would not be exact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;

namespace {

// Several dtypes, a strided leaf, a zero-size leaf and a nested node, every value from `start` on;
// `reversed` inserts the same entries in the opposite order (same layout).
TensorTree make_tree(double start, bool reversed = false) {
  std::vector<std::pair<Path, Tensor>> leaves = {
      {{"obs"}, Tensor::arange({4, 3}, start, 1, {DType::Float32})},
      {{"goal"}, Tensor::arange({4, 3}, start + 100, 1, {DType::Float32})},
      {{"action"}, Tensor::arange({4}, start + 20, 1, {DType::Int64})},
      {{"mask"}, Tensor::arange({4, 5}, start + 30, 1, {DType::UInt8})},
      {{"next", "obs"}, Tensor::arange({6, 4}, start + 60, 1, {DType::Float64}).transpose(0, 1)},
      {{"next", "none"}, Tensor::empty({4, 0}, {DType::Int16})},
  };
  if (reversed) std::reverse(leaves.begin(), leaves.end());
  TensorTree tree(Shape{4});
  for (auto& [path, leaf] : leaves) tree.set(path, leaf);
  return tree;
}

// Same paths, and every element of every leaf equal, compared one by one.
void require_same_values(const TensorTree& actual, const TensorTree& expected) {
  REQUIRE(actual.keys({.include_nested = true, .leaves_only = true}).size() ==
          expected.keys({.include_nested = true, .leaves_only = true}).size());
  expected.for_each_leaf([&](const Path& path, const Tensor& want) {
    const Tensor& got = actual.get(path);
    INFO("leaf " << path_str(path));
    REQUIRE(got.shape() == want.shape());
    REQUIRE(got.dtype() == want.dtype());
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      INFO("element " << i);
      REQUIRE(got.value_at_linear(i) == want.value_at_linear(i));
    }
  });
}

std::vector<std::byte> bytes_of(const TensorTree& consolidated) {
  const auto* data = consolidated.storage()->data();
  return {data, data + consolidated.schema()->total_bytes()};
}

}  // namespace

TEST_CASE("consolidate_into copies a tree of the same layout into the target's buffer in place") {
  TensorTree packed = make_tree(1).consolidate();
  const StoragePtr buffer = packed.storage();
  const std::vector<Path> keys = packed.keys({.include_nested = true});
  const Tensor earlier_view = packed.get("obs");

  // Same layout, other insertion order, other values.
  const TensorTree source = make_tree(1000, true);
  source.consolidate_into(packed);

  REQUIRE(packed.is_consolidated());
  CHECK(packed.storage() == buffer);
  CHECK(packed.keys({.include_nested = true}) == keys);
  require_same_values(packed, source);
  // Views of the buffer taken before the refresh see the new values.
  CHECK(earlier_view.value_at_linear(0).real() == 1000);
  // Byte for byte what consolidate() would have made, padding included.
  CHECK(bytes_of(packed) == bytes_of(source.consolidate()));
}

TEST_CASE("consolidate_into re-plans into a new buffer when the layout changed") {
  TensorTree packed = make_tree(1).consolidate();
  const StoragePtr old_buffer = packed.storage();
  const Tensor old_view = packed.get("obs");

  TensorTree changed = make_tree(500);
  SECTION("a leaf of another shape") { changed.set("action", Tensor::arange({4, 2}, 700, 1, {DType::Int64})); }
  SECTION("a leaf of another dtype") { changed.set("action", Tensor::arange({4}, 700, 1, {DType::Int32})); }
  SECTION("an added leaf") { changed.set({"next", "reward"}, Tensor::arange({4}, 700, 1, {DType::Float32})); }
  changed.consolidate_into(packed);

  REQUIRE(packed.is_consolidated());
  CHECK(packed.storage() != old_buffer);
  CHECK(packed.schema()->fingerprint() == changed.consolidate().schema()->fingerprint());
  CHECK(packed.keys({.include_nested = true}) == changed.keys({.include_nested = true}));
  require_same_values(packed, changed);
  // The old buffer was left alone.
  CHECK(old_view.value_at_linear(0).real() == 1);

  // The next refresh of the new layout is in place again.
  const StoragePtr new_buffer = packed.storage();
  changed.fill_(42);
  changed.consolidate_into(packed);
  CHECK(packed.storage() == new_buffer);
  require_same_values(packed, changed);
}

TEST_CASE("consolidate_into a tree that is not consolidated makes it consolidated") {
  const TensorTree source = make_tree(7);
  TensorTree target;
  SECTION("an empty tree") {}
  SECTION("a tree with leaves of its own") { target = make_tree(1); }
  SECTION("a tree consolidated, then changed") {
    target = make_tree(1).consolidate();
    target.erase("mask");
  }
  source.consolidate_into(target);
  REQUIRE(target.is_consolidated());
  require_same_values(target, source);
  CHECK(target.schema()->fingerprint() == source.consolidate().schema()->fingerprint());
}

TEST_CASE("consolidate_into does not write into a buffer that a leaf of the source views") {
  TensorTree packed = make_tree(1).consolidate();
  const StoragePtr buffer = packed.storage();
  // A tree of the same layout whose leaves are views of packed's buffer, two of them swapped
  // (same shape and dtype): an in-place copy would overwrite one before reading it.
  TensorTree source = packed;
  source.set("obs", packed.get("goal"));
  source.set("goal", packed.get("obs"));
  const TensorTree expected = source.clone();
  REQUIRE(expected.get("obs").value_at_linear(0).real() == 101);
  source.consolidate_into(packed);
  CHECK(packed.storage() != buffer);
  require_same_values(packed, expected);
}

TEST_CASE("consolidate_into itself consolidates the tree and keeps its values") {
  TensorTree tree = make_tree(3);
  const TensorTree expected = tree.clone();
  tree.consolidate_into(tree);
  REQUIRE(tree.is_consolidated());
  require_same_values(tree, expected);
}
