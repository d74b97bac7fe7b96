// TensorDict's tree API on TensorTree, element by element against what TensorDict gives. The tree:
// batch_size [2, 3];
//   obs        float [2,3,4]  obs(i,j,k)  = 1 + 12i + 4j + k
//   act        float [2,3,2]  act(i,j,k)  = 200 + 4j + 2i + k   (a permuted, non-contiguous view)
//   next.reward float [2,3]   rew(i,j)    = 100 + 3i + j
//   info (batch_size [2,3,5]) info.x int64 [2,3,5]  x(i,j,m) = 1000 + 15i + 5j + m
// `base` is added to every value, so two trees built with different bases differ everywhere.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/work.hpp"

using namespace tensortree;

namespace {

double obs(double base, int i, int j, int k) { return base + 1 + 12 * i + 4 * j + k; }
double act(double base, int i, int j, int k) { return base + 200 + 4 * j + 2 * i + k; }
double rew(double base, int i, int j) { return base + 100 + 3 * i + j; }
double info_x(double base, int i, int j, int m) { return base + 1000 + 15 * i + 5 * j + m; }

TensorTree make_tree(double base = 0) {
  TensorTree tree({2, 3});
  tree.set("obs", Tensor::arange({2, 3, 4}, base + 1));
  tree.set("act", Tensor::arange({3, 2, 2}, base + 200).permute({1, 0, 2}));
  tree.set("next.reward", Tensor::arange({2, 3}, base + 100));
  TensorTree info({2, 3, 5});
  info.set("x", Tensor::arange({2, 3, 5}, base + 1000, 1, {DType::Int64}));
  tree.set("info", std::move(info));
  return tree;
}

// Checks every element of `t` (shape `shape`, C order) against fn(index).
void require_each(const Tensor& t, const Shape& shape, const std::function<double(const std::vector<int>&)>& fn) {
  REQUIRE(t.shape() == shape);
  std::vector<int> index(shape.size(), 0);
  for (std::int64_t n = 0; n < t.numel(); ++n) {
    std::int64_t rest = n;
    for (std::size_t d = shape.size(); d-- > 0;) {
      index[d] = static_cast<int>(rest % shape[d]);
      rest /= shape[d];
    }
    INFO("element " << n);
    REQUIRE(t.value_at_linear(n).real() == fn(index));
  }
}

Tensor bools(Shape shape, const std::vector<int>& values) {
  Tensor t = Tensor::empty(std::move(shape), {DType::Bool});
  for (std::size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i] != 0;
  return t;
}

// a + b element-wise as float64, by a plain loop (the library has no add).
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), {DType::Float64});
  for (std::int64_t n = 0; n < a.numel(); ++n) {
    out.data<double>()[n] = a.value_at_linear(n).real() + b.value_at_linear(n).real();
  }
  return out;
}

}  // namespace

TEST_CASE("unbind(1) gives one tree per column; nested batch sizes lose the same dimension") {
  const std::vector<TensorTree> parts = make_tree().unbind(1);
  REQUIRE(parts.size() == 3);
  for (int j = 0; j < 3; ++j) {
    const TensorTree& t = parts[static_cast<std::size_t>(j)];
    CHECK(t.batch_size() == Shape{2});
    CHECK(t.subtree("info").batch_size() == Shape{2, 5});
    require_each(t.get("obs"), {2, 4}, [&](auto& x) { return obs(0, x[0], j, x[1]); });
    require_each(t.get("act"), {2, 2}, [&](auto& x) { return act(0, x[0], j, x[1]); });
    require_each(t.get("next.reward"), {2}, [&](auto& x) { return rew(0, x[0], j); });
    require_each(t.get("info.x"), {2, 5}, [&](auto& x) { return info_x(0, x[0], j, x[1]); });
  }
  CHECK_THROWS_AS(make_tree().unbind(2), InvalidArgument);
}

TEST_CASE("split by sizes, by size and chunk cut a batch dimension into views") {
  const TensorTree tree = make_tree();
  for (const auto& parts : {tree.split(std::vector<std::int64_t>{2, 1}, 1), tree.split(2, -1), tree.chunk(2, 1)}) {
    REQUIRE(parts.size() == 2);
    CHECK(parts[0].batch_size() == Shape{2, 2});
    CHECK(parts[1].batch_size() == Shape{2, 1});
    require_each(parts[1].get("obs"), {2, 1, 4}, [](auto& x) { return obs(0, x[0], 2, x[2]); });
    require_each(parts[0].get("act"), {2, 2, 2}, [](auto& x) { return act(0, x[0], x[1], x[2]); });
    require_each(parts[1].get("info.x"), {2, 1, 5}, [](auto& x) { return info_x(0, x[0], 2, x[2]); });
    CHECK(parts[0].get("obs").data_ptr() == tree.get("obs").data_ptr());
  }
  CHECK(tree.chunk(5, 1).size() == 3);  // torch.chunk: pieces of ceil(3/5) = 1 row
  CHECK_THROWS_AS(tree.split(std::vector<std::int64_t>{1, 1}, 1), InvalidArgument);
  CHECK_THROWS_AS(tree.split(1, 2), InvalidArgument);
  CHECK_THROWS_AS(tree.chunk(0, 0), InvalidArgument);
}

TEST_CASE("reshape merges batch dimensions, copying only the leaf whose strides need it") {
  const TensorTree tree = make_tree();
  const TensorTree flat = tree.reshape({-1});
  CHECK(flat.batch_size() == Shape{6});
  CHECK(flat.subtree("info").batch_size() == Shape{6, 5});
  require_each(flat.get("obs"), {6, 4}, [](auto& x) { return obs(0, x[0] / 3, x[0] % 3, x[1]); });
  require_each(flat.get("act"), {6, 2}, [](auto& x) { return act(0, x[0] / 3, x[0] % 3, x[1]); });
  require_each(flat.get("next.reward"), {6}, [](auto& x) { return rew(0, x[0] / 3, x[0] % 3); });
  require_each(flat.get("info.x"), {6, 5}, [](auto& x) { return info_x(0, x[0] / 3, x[0] % 3, x[1]); });
  CHECK(flat.get("obs").data_ptr() == tree.get("obs").data_ptr());
  CHECK_THROWS_AS(tree.view({6}), InvalidArgument);  // act's strides allow no view
  const TensorTree viewed = tree.exclude({"act"}).view({3, 2});
  require_each(viewed.get("obs"), {3, 2, 4}, [](auto& x) {
    const int n = x[0] * 2 + x[1];
    return obs(0, n / 3, n % 3, x[2]);
  });
  CHECK_THROWS_AS(tree.reshape({4}), InvalidArgument);
}

TEST_CASE("unsqueeze, squeeze and permute move batch dimensions and leave feature dimensions") {
  const TensorTree tree = make_tree();
  const TensorTree u = tree.unsqueeze(1);
  CHECK(u.batch_size() == Shape{2, 1, 3});
  CHECK(u.subtree("info").batch_size() == Shape{2, 1, 3, 5});
  require_each(u.get("obs"), {2, 1, 3, 4}, [](auto& x) { return obs(0, x[0], x[2], x[3]); });
  CHECK(u.squeeze(1).equal(tree));
  CHECK(u.squeeze().equal(tree));
  CHECK(tree.squeeze(0).batch_size() == Shape{2, 3});  // size 2: unchanged
  CHECK(tree.unsqueeze(-1).batch_size() == Shape{2, 3, 1});
  CHECK_THROWS_AS(tree.unsqueeze(3), InvalidArgument);

  const TensorTree p = tree.permute({1, 0});
  CHECK(p.batch_size() == Shape{3, 2});
  CHECK(p.subtree("info").batch_size() == Shape{3, 2, 5});
  require_each(p.get("obs"), {3, 2, 4}, [](auto& x) { return obs(0, x[1], x[0], x[2]); });
  require_each(p.get("act"), {3, 2, 2}, [](auto& x) { return act(0, x[1], x[0], x[2]); });
  require_each(p.get("info.x"), {3, 2, 5}, [](auto& x) { return info_x(0, x[1], x[0], x[2]); });
  CHECK_THROWS_AS(tree.permute({0, 0}), InvalidArgument);
  CHECK_THROWS_AS(tree.permute({0}), InvalidArgument);
}

TEST_CASE("expand adds leading batch dimensions and stretches size-1 ones as stride-0 views") {
  const TensorTree e = make_tree().expand({4, 2, 3});
  CHECK(e.batch_size() == Shape{4, 2, 3});
  CHECK(e.subtree("info").batch_size() == Shape{4, 2, 3, 5});
  require_each(e.get("obs"), {4, 2, 3, 4}, [](auto& x) { return obs(0, x[1], x[2], x[3]); });
  require_each(e.get("info.x"), {4, 2, 3, 5}, [](auto& x) { return info_x(0, x[1], x[2], x[3]); });
  const TensorTree column = make_tree().slice(1, {0, 1});  // batch_size [2, 1]
  const TensorTree wide = column.expand({2, 3});
  require_each(wide.get("next.reward"), {2, 3}, [](auto& x) { return rew(0, x[0], 0); });
  CHECK_THROWS_AS(make_tree().expand({2, 4}), InvalidArgument);
  CHECK_THROWS_AS(make_tree().expand({3}), InvalidArgument);
}

TEST_CASE("masked_select and index(bool mask) gather rows in C order into one batch dimension") {
  const TensorTree tree = make_tree();
  const Tensor mask = bools({2, 3}, {1, 0, 1, 0, 1, 1});
  const std::vector<std::pair<int, int>> rows{{0, 0}, {0, 2}, {1, 1}, {1, 2}};
  for (const TensorTree& picked : {tree.masked_select(mask), tree.index(mask)}) {
    CHECK(picked.batch_size() == Shape{4});
    CHECK(picked.subtree("info").batch_size() == Shape{4, 5});
    require_each(picked.get("obs"), {4, 4}, [&](auto& x) { return obs(0, rows[x[0]].first, rows[x[0]].second, x[1]); });
    require_each(picked.get("act"), {4, 2}, [&](auto& x) { return act(0, rows[x[0]].first, rows[x[0]].second, x[1]); });
    require_each(picked.get("info.x"), {4, 5},
                 [&](auto& x) { return info_x(0, rows[x[0]].first, rows[x[0]].second, x[1]); });
  }
  const TensorTree second = tree.index(bools({2}, {0, 1}));  // a mask over the first dimension only
  CHECK(second.batch_size() == Shape{1, 3});
  require_each(second.get("next.reward"), {1, 3}, [](auto& x) { return rew(0, 1, x[1]); });
  CHECK_THROWS_AS(tree.masked_select(bools({3}, {1, 1, 1})), InvalidArgument);
  CHECK_THROWS_AS(tree.masked_select(bools({2, 3, 4}, std::vector<int>(24, 1))), InvalidArgument);
  CHECK_THROWS_AS(tree.masked_select(Tensor::zeros({2, 3})), InvalidArgument);
}

TEST_CASE("where takes each leaf from this tree where cond is true and from the other elsewhere") {
  const TensorTree mine = make_tree();
  const TensorTree theirs = make_tree(10000);
  const Tensor cond = bools({2, 3}, {1, 0, 0, 1, 1, 0});
  const auto pick = [&](int i, int j) { return cond.data<bool>()[i * 3 + j] ? 0.0 : 10000.0; };
  const TensorTree out = mine.where(cond, theirs);
  require_each(out.get("obs"), {2, 3, 4}, [&](auto& x) { return obs(pick(x[0], x[1]), x[0], x[1], x[2]); });
  require_each(out.get("act"), {2, 3, 2}, [&](auto& x) { return act(pick(x[0], x[1]), x[0], x[1], x[2]); });
  require_each(out.get("next.reward"), {2, 3}, [&](auto& x) { return rew(pick(x[0], x[1]), x[0], x[1]); });
  require_each(out.get("info.x"), {2, 3, 5}, [&](auto& x) { return info_x(pick(x[0], x[1]), x[0], x[1], x[2]); });
  CHECK_THROWS_AS(mine.where(cond, theirs.exclude({"act"})), InvalidArgument);
  CHECK_THROWS_AS(mine.where(bools({3}, {1, 1, 1}), theirs), InvalidArgument);
}

TEST_CASE("masked_fill_ writes the value in every leaf where the mask is true, in place") {
  const TensorTree tree = make_tree();
  const Tensor mask = bools({2}, {0, 1});
  tree.masked_fill_(mask, -5);
  require_each(tree.get("obs"), {2, 3, 4}, [](auto& x) { return x[0] == 1 ? -5 : obs(0, x[0], x[1], x[2]); });
  require_each(tree.get("act"), {2, 3, 2}, [](auto& x) { return x[0] == 1 ? -5 : act(0, x[0], x[1], x[2]); });
  require_each(tree.get("info.x"), {2, 3, 5}, [](auto& x) { return x[0] == 1 ? -5 : info_x(0, x[0], x[1], x[2]); });
  CHECK_THROWS_AS(tree.masked_fill_(bools({3}, {1, 1, 1}), 0), InvalidArgument);
}

TEST_CASE("zero_, fill_ and fill_(key) write in place and keep a consolidated tree consolidated") {
  TensorTree tree = make_tree().consolidate();
  tree.fill_("next", 7);
  require_each(tree.get("next.reward"), {2, 3}, [](auto&) { return 7; });
  require_each(tree.get("obs"), {2, 3, 4}, [](auto& x) { return obs(0, x[0], x[1], x[2]); });
  tree.fill_("obs", 3);
  require_each(tree.get("obs"), {2, 3, 4}, [](auto&) { return 3; });
  tree.zero_();
  CHECK(tree.is_consolidated());
  for (const auto& [path, leaf] : tree.items()) {
    INFO(path_str(path));
    for (std::int64_t n = 0; n < leaf.numel(); ++n) REQUIRE(leaf.value_at_linear(n).real() == 0);
  }
  CHECK_THROWS_AS(tree.fill_("missing", 1), InvalidArgument);
}

TEST_CASE("update_ copies a subset of keys into existing leaves and rejects mismatches before writing") {
  const TensorTree tree = make_tree();
  const void* reward_memory = tree.get("next.reward").data_ptr();
  const TensorTree source = make_tree(500).select({"next.reward", "info"});
  tree.update_(source);
  CHECK(tree.get("next.reward").data_ptr() == reward_memory);
  require_each(tree.get("next.reward"), {2, 3}, [](auto& x) { return rew(500, x[0], x[1]); });
  require_each(tree.get("info.x"), {2, 3, 5}, [](auto& x) { return info_x(500, x[0], x[1], x[2]); });
  require_each(tree.get("obs"), {2, 3, 4}, [](auto& x) { return obs(0, x[0], x[1], x[2]); });

  TensorTree extra = make_tree(900);
  extra.set("new_key", Tensor::zeros({2, 3}));
  CHECK_THROWS_AS(tree.update_(extra), InvalidArgument);
  require_each(tree.get("obs"), {2, 3, 4}, [](auto& x) { return obs(0, x[0], x[1], x[2]); });  // untouched
  TensorTree wrong_shape({2, 3});
  wrong_shape.set("obs", Tensor::zeros({2, 3, 5}));
  CHECK_THROWS_AS(tree.update_(wrong_shape), InvalidArgument);
}

TEST_CASE("rename_key_ moves a leaf or a sub-tree to a new key, last in order") {
  TensorTree tree = make_tree();
  tree.rename_key_("obs", "observation");
  CHECK_FALSE(tree.contains("obs"));
  require_each(tree.get("observation"), {2, 3, 4}, [](auto& x) { return obs(0, x[0], x[1], x[2]); });
  tree.rename_key_("next.reward", "reward");
  require_each(tree.get("reward"), {2, 3}, [](auto& x) { return rew(0, x[0], x[1]); });
  tree.rename_key_("info", "extras");
  require_each(tree.get("extras.x"), {2, 3, 5}, [](auto& x) { return info_x(0, x[0], x[1], x[2]); });
  const std::vector<std::pair<Path, Tensor>> items = tree.items();
  REQUIRE(items.size() == 4);
  CHECK(items[0].first == Path{"act"});
  CHECK(items[1].first == Path{"observation"});
  CHECK(items[3].first == Path{"extras", "x"});
  CHECK_THROWS_AS(tree.rename_key_("act", "reward", true), InvalidArgument);
  CHECK_THROWS_AS(tree.rename_key_("missing", "other"), InvalidArgument);
  CHECK_THROWS_AS(tree.rename_key_("extras", "extras.inner"), InvalidArgument);
}

TEST_CASE("apply over two trees pairs leaves by key; allclose compares them") {
  const TensorTree a = make_tree();
  const TensorTree b = make_tree(50);
  const TensorTree sum = a.apply(add, b);
  require_each(sum.get("obs"), {2, 3, 4}, [](auto& x) { return obs(0, x[0], x[1], x[2]) + obs(50, x[0], x[1], x[2]); });
  require_each(sum.get("act"), {2, 3, 2}, [](auto& x) { return act(0, x[0], x[1], x[2]) + act(50, x[0], x[1], x[2]); });
  require_each(sum.get("info.x"), {2, 3, 5},
               [](auto& x) { return info_x(0, x[0], x[1], x[2]) + info_x(50, x[0], x[1], x[2]); });
  CHECK_THROWS_AS(a.apply(add, b.exclude({"next"})), InvalidArgument);
  CHECK_THROWS_AS(a.apply(add, b.reshape({6})), InvalidArgument);

  CHECK(a.allclose(a.clone()));
  CHECK_FALSE(a.allclose(b));
  CHECK(a.allclose(b, 0.0, 50.0));
  CHECK_THROWS_AS(a.allclose(b.exclude({"obs"})), InvalidArgument);
}

TEST_CASE("sum, mean, min and max reduce one batch dimension of every leaf") {
  const TensorTree tree = make_tree();
  const TensorTree s = tree.sum(1);
  CHECK(s.batch_size() == Shape{2});
  CHECK(s.subtree("info").batch_size() == Shape{2, 5});
  require_each(s.get("obs"), {2, 4}, [](auto& x) {
    return obs(0, x[0], 0, x[1]) + obs(0, x[0], 1, x[1]) + obs(0, x[0], 2, x[1]);
  });
  CHECK(s.get("info.x").dtype() == DType::Int64);
  require_each(s.get("info.x"), {2, 5}, [](auto& x) {
    return info_x(0, x[0], 0, x[1]) + info_x(0, x[0], 1, x[1]) + info_x(0, x[0], 2, x[1]);
  });
  require_each(tree.exclude({"info"}).mean(0).get("act"), {3, 2}, [](auto& x) { return (act(0, 0, x[0], x[1]) + act(0, 1, x[0], x[1])) / 2; });
  require_each(tree.min(-1).get("next.reward"), {2}, [](auto& x) { return rew(0, x[0], 0); });
  require_each(tree.max(0).get("info.x"), {3, 5}, [](auto& x) { return info_x(0, 1, x[0], x[1]); });
  CHECK_THROWS_AS(tree.sum(2), InvalidArgument);
  CHECK_THROWS_AS(tree.mean(0), InvalidArgument);  // info.x is int64: torch.mean refuses it too
}

TEST_CASE("to(device, non_blocking) returns a Work to wait on; same-device leaves are shared") {
  const TensorTree tree = make_tree();
  auto [moved, work] = tree.to(Device::cpu(), true);
  REQUIRE(work);
  work->wait();
  CHECK(moved.get("obs").data_ptr() == tree.get("obs").data_ptr());
  CHECK(moved.equal(tree));
  if (cuda_device_count() == 0) {
    CHECK_THROWS_AS(tree.to(Device::cuda(0), true), NotSupported);
    CHECK_THROWS_AS(tree.pin_memory(), NotSupported);
  } else {
    auto [gpu, copying] = tree.to(Device::cuda(0), true);
    copying->wait();
    CHECK(gpu.to(Device::cpu()).equal(tree));
    const TensorTree pinned = tree.pin_memory();
    CHECK(pinned.get("obs").storage()->is_pinned());
    CHECK(pinned.equal(tree));
  }
}

TEST_CASE("share_memory_ puts the tree in a memfd that a forked child and a second mapping see") {
  TensorTree tree = make_tree();
  CHECK_FALSE(tree.is_shared());
  tree.share_memory_();
  REQUIRE(tree.is_shared());
  CHECK(tree.equal(make_tree()));
  const int fd = tree.storage()->shared_fd();
  REQUIRE(fd >= 0);

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    tree.get("obs").fill_(-42);  // the child's write must reach the parent's pages
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  require_each(tree.get("obs"), {2, 3, 4}, [](auto&) { return -42; });

  // What another process does with the descriptor: map it and rebuild the tree from the schema.
  const TensorTree mapped = TensorTree::from_consolidated(Storage::map_shared(fd), tree.schema());
  CHECK(mapped.is_shared());
  mapped.get("next.reward").fill_(9);
  require_each(tree.get("next.reward"), {2, 3}, [](auto&) { return 9; });
  require_each(tree.get("info.x"), {2, 3, 5}, [](auto& x) { return info_x(0, x[0], x[1], x[2]); });
}

TEST_CASE("from_map and from_nested build trees with one batch_size and check every leaf against it") {
  const TensorTree built = TensorTree::from_map(
      {2, 3}, {{"obs", Tensor::arange({2, 3, 4}, 1)}, {"next.reward", Tensor::arange({2, 3}, 100)}});
  require_each(built.get("obs"), {2, 3, 4}, [](auto& x) { return obs(0, x[0], x[1], x[2]); });
  require_each(built.get("next.reward"), {2, 3}, [](auto& x) { return rew(0, x[0], x[1]); });
  CHECK(built.subtree("next").batch_size() == Shape{2, 3});
  CHECK_THROWS_AS(TensorTree::from_map({2, 3}, {{"bad", Tensor::zeros({3, 2})}}), InvalidArgument);

  const TensorTree nested = TensorTree::from_nested(
      {2, 3}, {{"obs", Tensor::arange({2, 3, 4}, 1)}, {"next", {{"reward", Tensor::arange({2, 3}, 100)}}}});
  CHECK(nested.equal(built));
  CHECK_THROWS_AS(TensorTree::from_nested({2, 3}, {{"next", {{"reward", Tensor::zeros({2})}}}}), InvalidArgument);
  CHECK_THROWS_AS(TensorTree::from_nested({2}, {{"a", Tensor::zeros({2})}, {"a", Tensor::zeros({2})}}),
                  InvalidArgument);
}
