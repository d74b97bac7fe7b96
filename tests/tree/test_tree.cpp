#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "tensor_checks.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;
using tensortree::test::require_values;
using Catch::Matchers::Contains;

namespace {

Tensor floats(Shape shape, double start, double step = 1.0) {
  return Tensor::arange(std::move(shape), start, step, {DType::Float32});
}

Tensor longs(Shape shape, double start, double step = 1.0) {
  return Tensor::arange(std::move(shape), start, step, {DType::Int64});
}

Tensor rows_of(std::vector<std::int64_t> rows) {
  Tensor index = Tensor::empty({static_cast<std::int64_t>(rows.size())}, {DType::Int64});
  for (std::size_t i = 0; i < rows.size(); ++i)
    index.at<std::int64_t>({static_cast<std::int64_t>(i)}) = rows[i];
  return index;
}

// Every element, in C order, equals start + i * step.
void require_arange(const Tensor& tensor, double start, double step = 1.0) {
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(tensor.value_at_linear(i).real() == start + static_cast<double>(i) * step);
  }
}

// A [3]-batched tree: obs [3,2] = 1..6, next.reward [3] = 101..103, next.done [3,1] = 201..203.
TensorTree rollout() {
  TensorTree tree({3});
  tree.set("obs", floats({3, 2}, 1));
  tree.set("next.reward", floats({3}, 101));
  tree.set({"next", "done"}, longs({3, 1}, 201));
  return tree;
}

std::vector<Path> paths(std::initializer_list<std::string> dotted) {
  std::vector<Path> out;
  for (const std::string& text : dotted) out.push_back(parse_path(text));
  return out;
}

}  // namespace

// ---- entries and paths ---------------------------------------------------------------------------

TEST_CASE("set and get reach leaves by dotted and by list paths", "[tree]") {
  TensorTree tree = rollout();
  require_arange(tree.get("obs"), 1);
  require_arange(tree.get({"next", "reward"}), 101);
  require_arange(tree.get("next.done"), 201);
  require_arange(tree.subtree("next").get("done"), 201);
  REQUIRE(tree.get(Path{"next", "done"}).dtype() == DType::Int64);
}

TEST_CASE("set creates missing intermediate nodes with their parent's batch_size", "[tree]") {
  TensorTree tree({2, 3});
  tree.set("a.b.c", floats({2, 3, 4}, 7));
  REQUIRE(tree.subtree("a").batch_size() == Shape{2, 3});
  REQUIRE(tree.subtree("a.b").batch_size() == Shape{2, 3});
  require_arange(tree.get("a.b.c"), 7);
}

TEST_CASE("keys and leaves keep insertion order, and replacing a key keeps its position", "[tree]") {
  TensorTree tree({2});
  tree.set("zeta", floats({2}, 1));
  tree.set("alpha", floats({2}, 3));
  tree.set("mid.y", floats({2}, 5));
  tree.set("mid.x", floats({2}, 7));
  tree.set("zeta", floats({2, 2}, 11));  // replaced in place
  REQUIRE(tree.keys() == paths({"zeta", "alpha", "mid"}));
  const auto leaves = tree.leaves();
  REQUIRE(leaves.size() == 4);
  REQUIRE(leaves[0].first == Path{"zeta"});
  require_arange(leaves[0].second, 11);
  REQUIRE(leaves[1].first == Path{"alpha"});
  require_arange(leaves[1].second, 3);
  REQUIRE(leaves[2].first == Path{"mid", "y"});
  require_arange(leaves[2].second, 5);
  REQUIRE(leaves[3].first == Path{"mid", "x"});
  require_arange(leaves[3].second, 7);
}

TEST_CASE("keys(include_nested, leaves_only) follows TensorDict: a sub-tree's keys before its own key",
          "[tree]") {
  const TensorTree tree = rollout();
  REQUIRE(tree.keys() == paths({"obs", "next"}));
  REQUIRE(tree.keys({.leaves_only = true}) == paths({"obs"}));
  REQUIRE(tree.keys({.include_nested = true}) == paths({"obs", "next.reward", "next.done", "next"}));
  REQUIRE(tree.keys({.include_nested = true, .leaves_only = true}) == paths({"obs", "next.reward", "next.done"}));
}

TEST_CASE("a key may contain the separator when given as a list path", "[tree]") {
  TensorTree tree({2});
  tree.set(Path{"a.b"}, floats({2}, 3));
  tree.set("a.b", floats({2}, 5));
  REQUIRE(tree.keys() == std::vector<Path>{Path{"a.b"}, Path{"a"}});
  require_arange(tree.get(Path{"a.b"}), 3);
  require_arange(tree.get({"a", "b"}), 5);
}

TEST_CASE("contains, is_leaf, size and empty describe entries at any depth", "[tree]") {
  const TensorTree tree = rollout();
  REQUIRE(tree.contains("obs"));
  REQUIRE(tree.contains("next"));
  REQUIRE(tree.contains("next.done"));
  REQUIRE_FALSE(tree.contains("next.missing"));
  REQUIRE_FALSE(tree.contains("obs.deeper"));
  REQUIRE_FALSE(tree.contains(""));
  REQUIRE(tree.is_leaf("obs"));
  REQUIRE_FALSE(tree.is_leaf("next"));
  REQUIRE(tree.size() == 2);
  REQUIRE(tree.subtree("next").size() == 2);
  REQUIRE_FALSE(tree.empty());
  REQUIRE(TensorTree({4}).empty());
}

TEST_CASE("lookups of absent or mistyped paths name the path", "[tree]") {
  TensorTree tree = rollout();
  REQUIRE_THROWS_AS(tree.get("next.missing"), InvalidArgument);
  REQUIRE_THROWS_WITH(tree.get("next.missing"), Contains("'next.missing'") && Contains("'reward'"));
  REQUIRE_THROWS_WITH(tree.get("obs.deeper"), Contains("'obs' is a leaf"));
  REQUIRE_THROWS_WITH(tree.get("next"), Contains("'next' is a sub-tree"));
  REQUIRE_THROWS_WITH(tree.subtree("obs"), Contains("'obs' is a leaf"));
  REQUIRE_THROWS_WITH(tree.is_leaf("nope"), Contains("'nope'"));
  REQUIRE_THROWS_WITH(tree.erase("next.nope"), Contains("'next.nope'"));
  REQUIRE_THROWS_AS(tree.get(""), InvalidArgument);
  REQUIRE(&tree.subtree("") == &tree);
}

TEST_CASE("erase removes leaves and sub-trees and keeps the others in order", "[tree]") {
  TensorTree tree = rollout();
  tree.set("extra", floats({3}, 301));
  tree.erase("obs");
  REQUIRE(tree.keys() == paths({"next", "extra"}));
  require_arange(tree.get("extra"), 301);  // positions after the erased key are still found
  tree.erase("next.reward");
  REQUIRE(tree.keys({.include_nested = true}) == paths({"next.done", "next", "extra"}));
  tree.erase("next");
  REQUIRE(tree.keys({.include_nested = true}) == paths({"extra"}));
  require_arange(tree.get("extra"), 301);
}

// ---- batch_size --------------------------------------------------------------------------------

TEST_CASE("set rejects a leaf whose shape does not start with batch_size and leaves the tree unchanged",
          "[tree]") {
  TensorTree tree = rollout();
  REQUIRE_THROWS_AS(tree.set("new.deep.leaf", floats({4, 2}, 1)), InvalidArgument);
  REQUIRE_THROWS_WITH(tree.set("new.deep.leaf", floats({4, 2}, 1)),
                      Contains("'new.deep.leaf'") && Contains("[4, 2]") && Contains("[3]"));
  REQUIRE_FALSE(tree.contains("new"));  // no intermediate node was left behind
  REQUIRE_THROWS_WITH(tree.set("obs", floats({}, 1)), Contains("'obs'") && Contains("[]") && Contains("[3]"));
  require_arange(tree.get("obs"), 1);
  REQUIRE_THROWS_AS(tree.set("undefined", Tensor{}), InvalidArgument);
}

TEST_CASE("a leaf's shape is checked against its own node's batch_size", "[tree]") {
  TensorTree tree({3});
  tree.set("inner", TensorTree({3, 5}));
  REQUIRE_THROWS_WITH(tree.set("inner.x", floats({3, 4}, 1)),
                      Contains("'inner.x'") && Contains("[3, 4]") && Contains("[3, 5]"));
  tree.set("inner.x", floats({3, 5, 2}, 1));
  require_arange(tree.get("inner.x"), 1);
}

TEST_CASE("set rejects a sub-tree whose batch_size does not start with its parent's", "[tree]") {
  TensorTree tree = rollout();
  REQUIRE_THROWS_WITH(tree.set("next.child", TensorTree({4})),
                      Contains("'next.child'") && Contains("[4]") && Contains("[3]"));
  REQUIRE_FALSE(tree.contains("next.child"));
  tree.set("next.child", TensorTree({3, 2}));
  REQUIRE(tree.subtree("next.child").batch_size() == Shape{3, 2});
}

TEST_CASE("set through a leaf is rejected, naming the leaf", "[tree]") {
  TensorTree tree = rollout();
  REQUIRE_THROWS_WITH(tree.set("obs.x", floats({3}, 1)), Contains("'obs' is a leaf"));
  REQUIRE_THROWS_WITH(tree.set("obs.x", TensorTree({3})), Contains("'obs' is a leaf"));
  require_arange(tree.get("obs"), 1);
}

TEST_CASE("set_batch_size checks leaves, sub-trees and the parent, also through a subtree reference",
          "[tree]") {
  TensorTree tree({3});
  tree.set("a.x", floats({3, 2, 4}, 1));
  TensorTree& a = tree.subtree("a");
  a.set_batch_size({3, 2});
  REQUIRE(tree.subtree("a").batch_size() == Shape{3, 2});
  REQUIRE_THROWS_WITH(a.set_batch_size({4}), Contains("'a'") && Contains("[4]") && Contains("[3]"));
  REQUIRE_THROWS_WITH(a.set_batch_size({3, 5}), Contains("'a.x'") && Contains("[3, 2, 4]"));
  REQUIRE_THROWS_WITH(tree.set_batch_size({2}), Contains("'a'") && Contains("[3, 2]"));
  tree.set_batch_size({});
  REQUIRE(tree.batch_size().empty());
  tree.set_batch_size({3, 2});
  REQUIRE(tree.batch_dims() == 2);
}

TEST_CASE("device() is the leaves' common device, nullopt for a tree without leaves", "[tree]") {
  REQUIRE_FALSE(TensorTree({2}).device().has_value());
  const TensorTree tree = rollout();
  REQUIRE(tree.device() == Device::cpu());
}

TEST_CASE("set_ writes into an existing leaf in place and checks shape and dtype", "[tree]") {
  TensorTree tree = rollout();
  const void* before = tree.get("obs").data_ptr();
  tree.set_("obs", floats({3, 2}, 50));
  REQUIRE(tree.get("obs").data_ptr() == before);
  require_arange(tree.get("obs"), 50);
  REQUIRE_THROWS_WITH(tree.set_("obs", floats({3, 3}, 1)), Contains("'obs'") && Contains("[3, 3]"));
  REQUIRE_THROWS_WITH(tree.set_("obs", longs({3, 2}, 1)), Contains("int64"));
}

// ---- value semantics -------------------------------------------------------------------------

TEST_CASE("a copy has its own structure while its leaves share storage", "[tree]") {
  const TensorTree original = rollout();
  TensorTree copy = original;
  copy.set("next.extra", floats({3}, 9));
  copy.erase("obs");
  REQUIRE(original.keys({.include_nested = true}) == paths({"obs", "next.reward", "next.done", "next"}));
  copy.get("next.reward").fill_(-4);
  require_values(original.get("next.reward"), {-4, -4, -4});
}

TEST_CASE("assigning through subtree() replaces the node in its tree and checks its batch_size", "[tree]") {
  TensorTree tree = rollout();
  TensorTree replacement({3, 2});
  replacement.set("z", floats({3, 2}, 41));
  tree.subtree("next") = replacement;
  REQUIRE(tree.keys({.include_nested = true}) == paths({"obs", "next.z", "next"}));
  require_arange(tree.get("next.z"), 41);
  REQUIRE(tree.subtree("next").batch_size() == Shape{3, 2});
  REQUIRE_THROWS_WITH(tree.subtree("next") = TensorTree({5}), Contains("'next'") && Contains("[5]"));
  require_arange(tree.get("next.z"), 41);
  tree.subtree("next") = tree;  // a tree holding a copy of itself
  require_arange(tree.get("next.obs"), 1);
  require_arange(tree.get("next.next.z"), 41);
}

TEST_CASE("sub-tree references stay valid when their root is moved", "[tree]") {
  TensorTree tree = rollout();
  TensorTree& next = tree.subtree("next");
  TensorTree moved = std::move(tree);
  next.set("added", floats({3}, 71));
  require_arange(moved.get("next.added"), 71);
  REQUIRE_THROWS_WITH(next.set("bad", floats({2}, 1)), Contains("'next.bad'"));
  std::vector<TensorTree> many;
  for (int i = 0; i < 8; ++i) many.push_back(rollout());  // reallocations move the roots
  many[0].subtree("next").set("deep.leaf", floats({3}, 81));
  require_arange(many[0].get("next.deep.leaf"), 81);
}

TEST_CASE("moving a node out of a tree leaves an empty node with its batch_size", "[tree]") {
  TensorTree tree = rollout();
  TensorTree taken = std::move(tree.subtree("next"));
  require_arange(taken.get("reward"), 101);
  REQUIRE(tree.contains("next"));
  REQUIRE(tree.subtree("next").empty());
  REQUIRE(tree.subtree("next").batch_size() == Shape{3});
}

// ---- batch indexing ------------------------------------------------------------------------

TEST_CASE("index(i) drops the first batch dimension and returns views", "[tree]") {
  TensorTree tree = rollout();
  const TensorTree row = tree.index(1);
  REQUIRE(row.batch_size().empty());
  REQUIRE(row.subtree("next").batch_size().empty());
  require_values(row.get("obs"), {3, 4});
  require_values(row.get("next.reward"), {102});
  require_values(row.get("next.done"), {202});
  require_values(tree.index(-1).get("obs"), {5, 6});
  row.get("obs").fill_(-1);
  require_values(tree.get("obs"), {1, 2, -1, -1, 5, 6});
  REQUIRE_THROWS_WITH(tree.index(3), Contains("3") && Contains("[3]"));
  REQUIRE_THROWS_AS(tree.index(-4), InvalidArgument);
  REQUIRE_THROWS_AS(row.index(0), InvalidArgument);
}

TEST_CASE("slice with a step returns views that write through to the parent", "[tree]") {
  TensorTree tree({4, 3});
  tree.set("x", floats({4, 3}, 1));
  tree.set("n.y", longs({4, 3, 2}, 100));
  const TensorTree rows = tree.slice(0, {0, 4, 2});
  REQUIRE(rows.batch_size() == Shape{2, 3});
  require_values(rows.get("x"), {1, 2, 3, 7, 8, 9});
  require_values(rows.get("n.y"), {100, 101, 102, 103, 104, 105, 112, 113, 114, 115, 116, 117});
  rows.get("x").fill_(0.5);
  require_values(tree.get("x"), {0.5, 0.5, 0.5, 4, 5, 6, 0.5, 0.5, 0.5, 10, 11, 12});

  const TensorTree columns = tree.slice(1, {-2, 100, 1});
  REQUIRE(columns.batch_size() == Shape{4, 2});
  REQUIRE(columns.subtree("n").batch_size() == Shape{4, 2});
  require_values(columns.get("x"), {0.5, 0.5, 5, 6, 0.5, 0.5, 11, 12});
  REQUIRE(tree.slice(0, {3, 1}).batch_size() == Shape{0, 3});
  REQUIRE_THROWS_WITH(tree.slice(2, {0, 1, 1}), Contains("dim 2") && Contains("[4, 3]"));
  REQUIRE_THROWS_WITH(tree.slice(0, {0, 1, 0}), Contains("step"));
}

TEST_CASE("index by a row tensor gathers rows into a new buffer", "[tree]") {
  const TensorTree tree = rollout();
  const TensorTree picked = tree.index(rows_of({2, 0, -1}));
  REQUIRE(picked.batch_size() == Shape{3});
  require_values(picked.get("obs"), {5, 6, 1, 2, 5, 6});
  require_values(picked.get("next.reward"), {103, 101, 103});
  require_values(picked.get("next.done"), {203, 201, 203});
  picked.get("obs").fill_(0);
  require_arange(tree.get("obs"), 1);

  Tensor narrow_rows = Tensor::empty({2}, {DType::Int32});
  narrow_rows.at<std::int32_t>({0}) = 1;
  narrow_rows.at<std::int32_t>({1}) = 1;
  require_values(tree.index(narrow_rows).get("next.reward"), {102, 102});
  REQUIRE_THROWS_WITH(tree.index(rows_of({0, 3})), Contains("3") && Contains("[3]"));
  REQUIRE_THROWS_WITH(tree.index(floats({2}, 0)), Contains("int64"));
}

// ---- whole-tree operations -------------------------------------------------------------------

TEST_CASE("apply builds a new tree and leaves the original untouched", "[tree]") {
  const TensorTree tree = rollout();
  // Each leaf holds start, start+1, ...: the doubled leaf holds 2*start, 2*start+2, ...
  const TensorTree doubled = tree.apply([](const Tensor& leaf) {
    return Tensor::arange(leaf.shape(), 2 * leaf.value_at_linear(0).real(), 2, {leaf.dtype()});
  });
  require_arange(doubled.get("obs"), 2, 2);
  require_arange(doubled.get("next.reward"), 202, 2);
  require_arange(doubled.get("next.done"), 402, 2);
  require_arange(tree.get("obs"), 1);
  REQUIRE_THROWS_WITH(tree.apply([](const Tensor& leaf) { return leaf.select(0, 0); }),
                      Contains("'obs'") && Contains("[3]"));
}

TEST_CASE("apply_ copies the results into the existing leaves", "[tree]") {
  const TensorTree tree = rollout();
  const void* before = tree.get("next.reward").data_ptr();
  tree.apply_([](const Tensor& leaf) { return Tensor::full(leaf.shape(), 9, {leaf.dtype()}); });
  REQUIRE(tree.get("next.reward").data_ptr() == before);
  require_values(tree.get("next.reward"), {9, 9, 9});
  require_values(tree.get("obs"), {9, 9, 9, 9, 9, 9});
  REQUIRE_THROWS_WITH(tree.apply_([](const Tensor& leaf) { return leaf.clone().view({-1}); }),
                      Contains("'obs'") && Contains("[6]"));
}

TEST_CASE("to() on the same device shares leaves; clone() copies them", "[tree]") {
  const TensorTree tree = rollout();
  const TensorTree same = tree.to(Device::cpu());
  REQUIRE(same.get("obs").data_ptr() == tree.get("obs").data_ptr());
  const TensorTree copy = tree.clone();
  REQUIRE(copy.get("obs").data_ptr() != tree.get("obs").data_ptr());
  REQUIRE(copy.equal(tree));
  copy.get("next.done").fill_(0);
  require_arange(tree.get("next.done"), 201);
  REQUIRE_FALSE(copy.equal(tree));
}

TEST_CASE("equal compares batch sizes, keys in any order and every value", "[tree]") {
  const TensorTree tree = rollout();
  TensorTree reordered({3});
  reordered.set("next.done", longs({3, 1}, 201));
  reordered.set("next.reward", floats({3}, 101));
  reordered.set("obs", floats({3, 2}, 1));
  REQUIRE(tree.equal(reordered));
  REQUIRE(reordered.equal(tree));

  TensorTree changed_value = tree.clone();
  changed_value.get("obs").slice(0, {2, 3}).fill_(-6);
  REQUIRE_FALSE(tree.equal(changed_value));
  TensorTree extra_key = tree;
  extra_key.set("more", floats({3}, 1));
  REQUIRE_FALSE(tree.equal(extra_key));
  TensorTree other_batch = tree;
  other_batch.set_batch_size({});
  REQUIRE_FALSE(tree.equal(other_batch));
  TensorTree leaf_for_node = tree;
  leaf_for_node.set("next", floats({3}, 1));
  REQUIRE_FALSE(tree.equal(leaf_for_node));
}

TEST_CASE("stack joins trees along a new batch dimension", "[tree]") {
  const std::vector<TensorTree> trees = {rollout(), rollout().apply([](const Tensor& leaf) {
                                           return Tensor::full(leaf.shape(), -1, {leaf.dtype()});
                                         })};
  const TensorTree outer = TensorTree::stack(trees, 0);
  REQUIRE(outer.batch_size() == Shape{2, 3});
  REQUIRE(outer.subtree("next").batch_size() == Shape{2, 3});
  require_values(outer.get("obs"), {1, 2, 3, 4, 5, 6, -1, -1, -1, -1, -1, -1});
  require_values(outer.get("next.reward"), {101, 102, 103, -1, -1, -1});

  const TensorTree inner = TensorTree::stack(trees, -1);
  REQUIRE(inner.batch_size() == Shape{3, 2});
  require_values(inner.get("next.reward"), {101, -1, 102, -1, 103, -1});
  require_values(inner.get("next.done"), {201, -1, 202, -1, 203, -1});
  require_values(inner.get("obs"), {1, 2, -1, -1, 3, 4, -1, -1, 5, 6, -1, -1});
}

TEST_CASE("cat joins trees along an existing batch dimension", "[tree]") {
  TensorTree small({1});
  small.set("obs", floats({1, 2}, 51));
  small.set("next.reward", floats({1}, 61));
  small.set("next.done", longs({1, 1}, 71));
  const std::vector<TensorTree> trees = {rollout(), small};
  const TensorTree joined = TensorTree::cat(trees, 0);
  REQUIRE(joined.batch_size() == Shape{4});
  require_values(joined.get("obs"), {1, 2, 3, 4, 5, 6, 51, 52});
  require_values(joined.get("next.reward"), {101, 102, 103, 61});
  require_values(joined.get("next.done"), {201, 202, 203, 71});
  require_values(TensorTree::cat({small, small}).get("next.reward"), {61, 61});
  require_values(TensorTree::stack({small, small}, 1).get("obs"), {51, 52, 51, 52});
}

TEST_CASE("stack and cat reject structure mismatches, naming the first differing key", "[tree]") {
  TensorTree missing = rollout();
  missing.erase("next.reward");
  std::vector<TensorTree> trees = {rollout(), missing};
  REQUIRE_THROWS_AS(TensorTree::stack(trees), InvalidArgument);
  REQUIRE_THROWS_WITH(TensorTree::stack(trees), Contains("'next.reward'") && Contains("tree 1"));
  REQUIRE_THROWS_WITH(TensorTree::cat(trees), Contains("'next.reward'"));

  TensorTree extra = rollout();
  extra.set("next.more", floats({3}, 1));
  trees = {rollout(), extra};
  REQUIRE_THROWS_WITH(TensorTree::stack(trees), Contains("'next.more'") && Contains("missing from tree 0"));

  TensorTree leaf_for_node = rollout();
  leaf_for_node.set("next", floats({3}, 1));
  trees = {rollout(), leaf_for_node};
  REQUIRE_THROWS_WITH(TensorTree::stack(trees), Contains("'next'") && Contains("leaf"));

  TensorTree wider = rollout();
  wider.set("obs", floats({3, 5}, 1));
  trees = {rollout(), wider};
  REQUIRE_THROWS_WITH(TensorTree::stack(trees), Contains("'obs'"));

  TensorTree other_batch = rollout();
  other_batch.set_batch_size({});
  trees = {rollout(), rollout().slice(0, {0, 2})};
  REQUIRE_THROWS_WITH(TensorTree::stack(trees), Contains("[2]") && Contains("[3]"));
  trees = {rollout(), other_batch};
  REQUIRE_THROWS_WITH(TensorTree::cat(trees), Contains("[]") && Contains("[3]"));

  REQUIRE_THROWS_AS(TensorTree::stack(std::vector<TensorTree>{}), InvalidArgument);
  trees = {rollout()};
  REQUIRE_THROWS_WITH(TensorTree::stack(trees, 2), Contains("dim 2"));
  REQUIRE_THROWS_WITH(TensorTree::cat(trees, 1), Contains("dim 1"));
}

// ---- key operations --------------------------------------------------------------------------

TEST_CASE("flatten_keys joins nested keys and unflatten_keys restores them", "[tree]") {
  TensorTree tree = rollout();
  tree.set("empty", TensorTree({3, 4}));
  const TensorTree flat = tree.flatten_keys();
  REQUIRE(flat.keys() == std::vector<Path>{{"obs"}, {"next.reward"}, {"next.done"}, {"empty"}});
  REQUIRE(flat.get(Path{"next.reward"}).data_ptr() == tree.get("next.reward").data_ptr());
  REQUIRE(flat.subtree(Path{"empty"}).batch_size() == Shape{3, 4});
  const TensorTree slashed = tree.flatten_keys('/');
  REQUIRE(slashed.keys() == std::vector<Path>{{"obs"}, {"next/reward"}, {"next/done"}, {"empty"}});

  const TensorTree restored = flat.unflatten_keys();
  REQUIRE(restored.keys({.include_nested = true}) == paths({"obs", "next.reward", "next.done", "next", "empty"}));
  REQUIRE(restored.equal(tree));
  require_arange(slashed.unflatten_keys('/').get("next.done"), 201);
}

TEST_CASE("flatten_keys and unflatten_keys reject keys that collide", "[tree]") {
  TensorTree tree = rollout();
  tree.set(Path{"next.reward"}, floats({3}, 1));
  REQUIRE_THROWS_AS(tree.flatten_keys(), InvalidArgument);
  REQUIRE_THROWS_WITH(tree.flatten_keys(), Contains("'next.reward'"));

  TensorTree flat({3});
  flat.set(Path{"a"}, floats({3}, 1));
  flat.set(Path{"a.b"}, floats({3}, 2));
  REQUIRE_THROWS_WITH(flat.unflatten_keys(), Contains("'a.b'") && Contains("leaf 'a'"));
  TensorTree twice({3});
  twice.set(Path{"x.y"}, floats({3}, 1));
  twice.set("x", TensorTree({3}));
  twice.set("x.y", floats({3}, 2));
  REQUIRE_THROWS_WITH(twice.unflatten_keys(), Contains("key 'x' collides"));
}

TEST_CASE("select keeps the named paths with their intermediate nodes; exclude drops them", "[tree]") {
  TensorTree tree = rollout();
  tree.set("next.inner.z", floats({3}, 11));
  const TensorTree picked = tree.select({"next.inner", "obs"});
  REQUIRE(picked.keys({.include_nested = true}) == paths({"obs", "next.inner.z", "next.inner", "next"}));
  REQUIRE(picked.get("obs").data_ptr() == tree.get("obs").data_ptr());
  require_arange(picked.get("next.inner.z"), 11);
  REQUIRE_THROWS_WITH(tree.select({"next.nope"}), Contains("'next.nope'"));
  const TensorTree by_list = tree.select(std::vector<Path>{{"next", "done"}});
  REQUIRE(by_list.keys({.include_nested = true}) == paths({"next.done", "next"}));
  require_arange(by_list.get("next.done"), 201);

  const TensorTree rest = tree.exclude({"next.reward", "obs", "not.there"});
  REQUIRE(rest.keys({.include_nested = true}) == paths({"next.done", "next.inner.z", "next.inner", "next"}));
  require_arange(rest.get("next.done"), 201);
  REQUIRE(tree.exclude(tree.keys()).empty());
}

TEST_CASE("update sets new and replaced leaves and merges sub-trees recursively", "[tree]") {
  TensorTree tree = rollout();
  TensorTree other({3});
  other.set("next.reward", floats({3}, 501));
  other.set("next.fresh", floats({3}, 601));
  other.set("top", longs({3}, 701));
  tree.update(other);
  REQUIRE(tree.keys({.include_nested = true}) == paths({"obs", "next.reward", "next.done", "next.fresh", "next", "top"}));
  require_arange(tree.get("next.reward"), 501);
  require_arange(tree.get("next.done"), 201);
  require_arange(tree.get("next.fresh"), 601);
  require_arange(tree.get("top"), 701);

  tree.subtree("next").update(tree);  // reads a snapshot of the tree it writes into
  require_arange(tree.get("next.obs"), 1);
  require_arange(tree.get("next.next.reward"), 501);

  TensorTree wrong({2});
  wrong.set("obs", floats({2}, 1));
  REQUIRE_THROWS_WITH(tree.update(wrong), Contains("'obs'") && Contains("[2]"));
}

TEST_CASE("for_each_leaf and for_each_node walk in insertion order, parents first", "[tree]") {
  TensorTree tree = rollout();
  tree.set("next.inner", TensorTree({3}));
  std::vector<Path> leaf_paths;
  std::vector<double> first_values;
  tree.for_each_leaf([&](const Path& path, const Tensor& leaf) {
    leaf_paths.push_back(path);
    first_values.push_back(leaf.value_at_linear(0).real());
  });
  REQUIRE(leaf_paths == paths({"obs", "next.reward", "next.done"}));
  REQUIRE(first_values == std::vector<double>{1, 101, 201});

  std::vector<Path> node_paths;
  std::vector<Shape> batches;
  tree.for_each_node([&](const Path& path, const TensorTree& node) {
    node_paths.push_back(path);
    batches.push_back(node.batch_size());
  });
  REQUIRE(node_paths == std::vector<Path>{{}, {"next"}, {"next", "inner"}});
  REQUIRE(batches == std::vector<Shape>{{3}, {3}, {3}});
}

TEST_CASE("the initializer-list constructor sets each leaf by path", "[tree]") {
  const TensorTree tree({2}, {{"a", floats({2}, 1)}, {"b.c", longs({2, 2}, 5)}});
  REQUIRE(tree.keys({.include_nested = true}) == paths({"a", "b.c", "b"}));
  require_arange(tree.get("b.c"), 5);
  REQUIRE_THROWS_AS(TensorTree({2}, {{"a", floats({3}, 1)}}), InvalidArgument);
}

// ---- printing --------------------------------------------------------------------------------

TEST_CASE("str prints TensorDict's repr with nested trees and fields sorted by key", "[tree]") {
  TensorTree tree({3});
  tree.set("a", floats({3, 4}, 1));
  tree.set("b.c", longs({3, 2}, 1));
  tree.set("B", Tensor::arange({3}, 1, 1, {DType::Int32}));
  const std::string expected =
      "TensorTree(\n"
      "    fields={\n"
      "        B: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.int32, is_shared=False),\n"
      "        a: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, is_shared=False),\n"
      "        b: TensorTree(\n"
      "            fields={\n"
      "                c: Tensor(shape=torch.Size([3, 2]), device=cpu, dtype=torch.int64, "
      "is_shared=False)},\n"
      "            batch_size=torch.Size([3]),\n"
      "            device=cpu,\n"
      "            is_shared=False)},\n"
      "    batch_size=torch.Size([3]),\n"
      "    device=cpu,\n"
      "    is_shared=False)";
  REQUIRE(tree.str() == expected);
}

TEST_CASE("operator<< prints each key in insertion order with its leaf's values, sub-trees indented",
          "[tree]") {
  TensorTree tree({2});
  tree.set("obs", floats({2, 2}, 1));
  tree.set("next.reward", floats({2}, 0.5));
  tree.set("steps", Tensor::arange({2}, 7, 1, {DType::Int32}));
  const std::string expected =
      "TensorTree(batch_size=[2], device=cpu)\n"
      "    obs: tensor([[1., 2.],\n"
      "                 [3., 4.]])\n"
      "    next: TensorTree(batch_size=[2], device=cpu)\n"
      "        reward: tensor([0.5000, 1.5000])\n"
      "    steps: tensor([7, 8], dtype=torch.int32)";
  REQUIRE(tree.values_str() == expected);
  std::ostringstream streamed;
  streamed << tree;
  REQUIRE(streamed.str() == expected);
}

TEST_CASE("operator<< abbreviates a leaf of more than 1000 elements as PyTorch does", "[tree]") {
  TensorTree tree({2});
  tree.set("big", longs({2, 1000}, 0));
  std::ostringstream streamed;
  streamed << tree;
  REQUIRE(streamed.str() ==
          "TensorTree(batch_size=[2], device=cpu)\n"
          "    big: tensor([[   0,    1,    2,  ...,  997,  998,  999],\n"
          "                 [1000, 1001, 1002,  ..., 1997, 1998, 1999]])");
}

TEST_CASE("operator<< on an empty tree prints its batch size and device None", "[tree]") {
  std::ostringstream streamed;
  streamed << TensorTree(Shape{4, 2});
  REQUIRE(streamed.str() == "TensorTree(batch_size=[4, 2], device=None)");
}

TEST_CASE("an empty tree prints device None like an empty TensorDict", "[tree]") {
  REQUIRE(TensorTree().str() ==
          "TensorTree(\n"
          "    fields={\n"
          "    },\n"
          "    batch_size=torch.Size([]),\n"
          "    device=None,\n"
          "    is_shared=False)");
}
