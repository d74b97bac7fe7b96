// TensorTree's communication methods between processes: send/recv/isend/irecv, init_remote and
// from_remote_init, the collectives, and the errors a receiver must survive unchanged. Every rank runs
// every test case; values depend on the sending rank and on the element, and every element is checked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ops_test_support.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// ---- trees -----------------------------------------------------------------------------------------

// A leaf of a test tree: its shape is the root's batch_size, then {node_batch} when its node has a
// batch dimension of its own, then `inner`.
struct LeafDef {
  Path path;
  DType dtype;
  Shape inner;
  std::int64_t node_batch = 0;
};

// What an actor sends a learner: images, actions, rewards, flags, a nested "next" step, episode
// statistics, a matrix, a node with a batch size of its own, and (optionally) half-precision leaves.
std::vector<LeafDef> rollout(bool with_halves = true) {
  std::vector<LeafDef> defs = {
      {{"obs"}, DType::UInt8, {3, 4, 4}},
      {{"action"}, DType::Int64, {}},
      {{"reward"}, DType::Float32, {}},
      {{"done"}, DType::Bool, {}},
      {{"next", "obs"}, DType::UInt8, {3, 4, 4}},
      {{"next", "reward"}, DType::Float32, {}},
      {{"info", "episode_return"}, DType::Float64, {}},
      {{"info", "episode_len"}, DType::Int32, {}},
      {{"features"}, DType::Float64, {3, 5}},
      {{"steps", "value"}, DType::Float32, {}, 2},
      {{"steps", "mask"}, DType::Bool, {}, 2},
  };
  if (with_halves) {
    defs.push_back({{"policy", "logits"}, DType::Float16, {2}});
    defs.push_back({{"policy", "value"}, DType::BFloat16, {}});
  }
  return defs;
}

// The rollout with zero-size leaves next to ordinary ones.
std::vector<LeafDef> with_empty_leaves() {
  std::vector<LeafDef> defs = rollout(false);
  defs.push_back({{"empty_rows"}, DType::Float32, {0}});
  defs.push_back({{"next", "empty"}, DType::Int64, {2, 0}});
  return defs;
}

Shape shape_of(const LeafDef& def, const Shape& batch) {
  Shape shape = batch;
  if (def.node_batch > 0) shape.push_back(def.node_batch);
  shape.insert(shape.end(), def.inner.begin(), def.inner.end());
  return shape;
}

// Element i of leaf number `leaf` (its index in the LeafDef list) of dtype `dtype`.
using LeafValue = std::function<double(std::size_t leaf, DType dtype, std::int64_t i)>;

// Distinct per rank, seed, leaf and element; exact in every dtype used; non-zero except bool's false.
LeafValue distinct(int rank, int seed) {
  return [=](std::size_t leaf, DType dtype, std::int64_t i) -> double {
    const std::int64_t r = rank;
    const std::int64_t s = seed;
    const auto l = static_cast<std::int64_t>(leaf);
    switch (dtype) {
      case DType::Bool: return (r + s + l + i) % 3 != 0 ? 1.0 : 0.0;
      case DType::UInt8:
      case DType::Int8: return static_cast<double>(1 + (r * 31 + s * 7 + l * 13 + i) % 120);
      case DType::Float16:
      case DType::BFloat16: return static_cast<double>(1 + (r * 5 + s * 3 + l * 7 + i) % 60);
      default: return static_cast<double>(1 + i % 1000 + 1000 * (r + 1) + 10000 * l + 100000 * (s % 100));
    }
  };
}

// 1..7 (bool: mixed), so that sums and products over four ranks stay exact in every dtype.
LeafValue small(int rank) {
  return [=](std::size_t leaf, DType dtype, std::int64_t i) -> double {
    const auto l = static_cast<std::int64_t>(leaf);
    if (dtype == DType::Bool) return (rank + l + i) % 3 != 0 ? 1.0 : 0.0;
    return small_value(rank, i + l);
  };
}

// Bit patterns sharing the top bit of a byte (bool: mixed), for the bitwise reductions.
LeafValue bits(int rank) {
  return [=](std::size_t leaf, DType dtype, std::int64_t i) -> double {
    const auto l = static_cast<std::int64_t>(leaf);
    if (dtype == DType::Bool) return (rank + l + i) % 2 == 0 ? 1.0 : 0.0;
    return bits_value(rank, i + l);
  };
}

// A contiguous CPU tensor whose element i (C order) holds value(i), for every dtype used here.
Tensor filled(const Shape& shape, DType dtype, const std::function<double(std::int64_t)>& value) {
  Tensor out = Tensor::empty(shape, {dtype});
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = out.data<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      if constexpr (std::is_arithmetic_v<T>) {
        data[i] = static_cast<T>(value(i));
      } else {
        data[i] = T(static_cast<float>(value(i)));
      }
    }
  });
  return out;
}

// A zero-filled leaf of `shape`: contiguous, or a non-contiguous view (a transposed one, or every
// second element of a larger one for 1-D shapes).
Tensor blank_leaf(const Shape& shape, DType dtype, bool strided) {
  if (!strided || shape.empty()) return Tensor::zeros(shape, {dtype});
  const auto n = static_cast<std::int64_t>(shape.size());
  if (n == 1) return Tensor::zeros({2 * shape[0]}, {dtype}).slice(0, {0, 2 * shape[0], 2});
  Shape swapped = shape;
  std::swap(swapped[static_cast<std::size_t>(n - 1)], swapped[static_cast<std::size_t>(n - 2)]);
  return Tensor::zeros(swapped, {dtype}).transpose(n - 2, n - 1);
}

struct How {
  bool reversed = false;      // insert the keys in the opposite order
  bool strided = false;       // every leaf a non-contiguous view
  bool consolidated = false;  // consolidate() the result
};

TensorTree build_tree(const std::vector<LeafDef>& defs, const Shape& batch, const LeafValue& value, How how = {}) {
  std::vector<std::size_t> order(defs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (how.reversed) std::reverse(order.begin(), order.end());
  TensorTree tree(batch);
  for (std::size_t index : order) {
    const LeafDef& def = defs[index];
    if (def.node_batch > 0) {
      const Path node(def.path.begin(), def.path.end() - 1);
      if (!tree.contains(node)) {
        Shape node_batch = batch;
        node_batch.push_back(def.node_batch);
        tree.set(node, TensorTree(node_batch));
      }
    }
    const Shape shape = shape_of(def, batch);
    const Tensor leaf = blank_leaf(shape, def.dtype, how.strided);
    leaf.copy_(filled(shape, def.dtype, [&](std::int64_t i) { return value(index, def.dtype, i); }));
    tree.set(def.path, leaf);
  }
  return how.consolidated ? tree.consolidate() : tree;
}

// Writes new values into every leaf of `tree` in place (its consolidation is kept).
void refill(const TensorTree& tree, const std::vector<LeafDef>& defs, const Shape& batch, const LeafValue& value) {
  for (std::size_t index = 0; index < defs.size(); ++index) {
    const LeafDef& def = defs[index];
    tree.get(def.path).copy_(
        filled(shape_of(def, batch), def.dtype, [&](std::int64_t i) { return value(index, def.dtype, i); }));
  }
}

// Empty when `tree` has exactly the leaves of `defs` with these shapes, dtypes and batch sizes, and
// every element equals value(leaf, dtype, i); otherwise the first difference, named by its path.
std::string tree_mismatch(const TensorTree& tree, const std::vector<LeafDef>& defs, const Shape& batch,
                          const LeafValue& value, double tolerance = 0.0) {
  std::size_t leaves = 0;
  tree.for_each_leaf([&](const Path&, const Tensor&) { ++leaves; });
  if (leaves != defs.size()) {
    return "the tree has " + std::to_string(leaves) + " leaves, expected " + std::to_string(defs.size());
  }
  if (tree.batch_size() != batch) return "batch_size " + shape_str(tree.batch_size()) + ", expected " + shape_str(batch);
  for (std::size_t index = 0; index < defs.size(); ++index) {
    const LeafDef& def = defs[index];
    std::string where = path_str(def.path);
    if (!tree.contains(def.path)) return where + " is missing";
    if (def.node_batch > 0) {
      const Path node(def.path.begin(), def.path.end() - 1);
      Shape node_batch = batch;
      node_batch.push_back(def.node_batch);
      if (tree.subtree(node).batch_size() != node_batch) {
        where += ": its node's batch_size is ";
        where += shape_str(tree.subtree(node).batch_size());
        return where;
      }
    }
    const std::string problem =
        mismatch(tree.get(def.path), def.dtype, shape_of(def, batch),
                 [&](std::int64_t i) { return value(index, def.dtype, i); }, tolerance);
    if (!problem.empty()) {
      where += ": ";
      where += problem;
      return where;
    }
  }
  return {};
}

// The value a reduction with `op` over `ranks` ranks leaves, bool reductions being logical.
LeafValue reduced_value(ReduceOp op, int ranks, const std::function<LeafValue(int)>& of_rank) {
  return [=](std::size_t leaf, DType dtype, std::int64_t i) -> double {
    const auto value = [&](int r) { return of_rank(r)(leaf, dtype, i); };
    if (dtype == DType::Bool) {
      bool any = false;
      bool all = true;
      int count = 0;
      for (int r = 0; r < ranks; ++r) {
        const bool b = value(r) != 0.0;
        any = any || b;
        all = all && b;
        count += b ? 1 : 0;
      }
      if (op == ReduceOp::BitwiseXor) return count % 2;
      const bool conjunction = op == ReduceOp::Product || op == ReduceOp::Min || op == ReduceOp::BitwiseAnd;
      return (conjunction ? all : any) ? 1.0 : 0.0;
    }
    return reduced(op, ranks, is_integral(dtype), value);
  };
}

// Empty when `call` throws an E; otherwise what it did instead.
template <class E, class Call>
std::string unless_thrown(Call&& call) {
  try {
    call();
  } catch (const E&) {
    return {};
  } catch (const std::exception& error) {
    return std::string("threw another exception: ") + error.what();
  }
  return "threw nothing";
}

// Whether `call` threw an E, and its message (or what happened instead).
struct Caught {
  bool thrown = false;
  std::string message;
};
template <class E, class Call>
Caught caught(Call&& call) {
  try {
    call();
  } catch (const E& error) {
    return {true, error.what()};
  } catch (const std::exception& error) {
    return {false, std::string("threw another exception: ") + error.what()};
  }
  return {false, "threw nothing"};
}

std::uint64_t fingerprint_of(const TensorTree& tree) { return tree.consolidate().schema()->fingerprint(); }

// A tree's layout as messages name it: "0x" and 16 hex digits of its fingerprint.
std::string layout_name(const TensorTree& tree) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(fingerprint_of(tree)));
  return text;
}

int right_of(const Group& group) { return (group.rank() + 1) % group.size(); }
int left_of(const Group& group) { return (group.rank() + group.size() - 1) % group.size(); }
int last_of(const Group& group) { return group.size() - 1; }

// A new group of every rank: its record of published layouts starts empty.
Group fresh_world() {
  std::vector<int> ranks(static_cast<std::size_t>(world_size()));
  std::iota(ranks.begin(), ranks.end(), 0);
  return context().new_group(ranks);
}

const Shape kBatch{4};

}  // namespace

// ---- send / recv / isend / irecv ---------------------------------------------------------------------

TEST_CASE("tree send/recv: a nested mixed-dtype tree reaches the right neighbour whatever the key order, "
          "consolidation or strides of either end",
          "[tree_comm]") {
  const std::vector<LeafDef> defs = rollout();
  for_each_group([&](const Group& group) {
    const int right = right_of(group);
    const int left = left_of(group);
    for (const bool send_consolidated : {false, true}) {
      for (const bool recv_consolidated : {false, true}) {
        for (const bool recv_strided : {false, true}) {
          if (recv_consolidated && recv_strided) continue;  // consolidated leaves are contiguous
          INFO("sender consolidated " << send_consolidated << ", receiver consolidated " << recv_consolidated
                                      << ", receiver strided " << recv_strided);
          const TensorTree mine = build_tree(defs, kBatch, distinct(group.rank(), 1),
                                             {.strided = !send_consolidated, .consolidated = send_consolidated});
          TensorTree into = build_tree(defs, kBatch, distinct(group.rank(), 90),
                                       {.reversed = true, .strided = recv_strided, .consolidated = recv_consolidated});
          const std::vector<Path> receiver_keys = into.keys({.include_nested = true});
          const Tensor reward_before = into.get("reward");
          const Tensor obs_before = into.get("next.obs");

          const WorkPtr sent = mine.isend(right, group, {.tag = 5});
          const int from = into.recv(left, group, {.tag = 5});
          sent->wait();

          CHECK(from == left);
          CHECK(tree_mismatch(into, defs, kBatch, distinct(left, 1)) == "");
          CHECK(into.keys({.include_nested = true}) == receiver_keys);
          CHECK(into.is_consolidated() == recv_consolidated);
          // Tensors taken from the receiver before the receive: a receiver of its own leaves is
          // written in place, so they view the new values; a consolidated one moves to the arrived
          // buffer and they keep the old one, with its values.
          const LeafValue before = recv_consolidated ? distinct(group.rank(), 90) : distinct(left, 1);
          CHECK(mismatch(reward_before, DType::Float32, {4}, [&](std::int64_t i) { return before(2, DType::Float32, i); }) == "");
          CHECK(mismatch(obs_before, DType::UInt8, {4, 3, 4, 4}, [&](std::int64_t i) { return before(4, DType::UInt8, i); }) == "");
          CHECK(tree_mismatch(mine, defs, kBatch, distinct(group.rank(), 1)) == "");
        }
      }
    }
  });
}

TEST_CASE("tree send is blocking and recv returns the sender; the sender's tree stays unchanged", "[tree_comm]") {
  const Group& world = context().world();
  const std::vector<LeafDef> defs = rollout();
  // Even ranks send first, odd ranks receive first: blocking calls on a ring of pairs.
  const int rank = world.rank();
  const int partner = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (partner >= world.size()) return;
  const TensorTree mine = build_tree(defs, kBatch, distinct(rank, 2), {.reversed = rank % 2 == 1});
  TensorTree into = build_tree(defs, kBatch, distinct(rank, 91), {.consolidated = true});
  if (rank % 2 == 0) {
    mine.send(partner, world, {.tag = 6});
    CHECK(into.recv(partner, world, {.tag = 6}) == partner);
  } else {
    CHECK(into.recv(partner, world, {.tag = 6}) == partner);
    mine.send(partner, world, {.tag = 6});
  }
  CHECK(tree_mismatch(into, defs, kBatch, distinct(partner, 2)) == "");
  CHECK(tree_mismatch(mine, defs, kBatch, distinct(rank, 2)) == "");
}

TEST_CASE("tree irecv keeps several receives in flight on different trees, completed in reverse order",
          "[tree_comm]") {
  const std::vector<LeafDef> defs = rollout();
  for_each_group([&](const Group& group) {
    const int right = right_of(group);
    const int left = left_of(group);
    // Three layouts (batch 2, 3, 4) on tags 1..3, and two receives of one layout on one tag: the
    // latter must be matched in posting order.
    struct Receive {
      Shape batch;
      int tag;
      int seed;
      TensorTree tree;
      WorkPtr work;
    };
    std::vector<Receive> receives;
    for (int k = 0; k < 3; ++k) {
      const Shape batch{2 + k};
      receives.push_back({batch, 1 + k, 10 + k, build_tree(defs, batch, distinct(group.rank(), 92), {.consolidated = k % 2 == 0}), nullptr});
    }
    receives.push_back({{2}, 4, 20, build_tree(defs, {2}, distinct(group.rank(), 93), {.reversed = true}), nullptr});
    receives.push_back({{2}, 4, 21, build_tree(defs, {2}, distinct(group.rank(), 94), {.consolidated = true}), nullptr});
    for (Receive& receive : receives) receive.work = receive.tree.irecv(left, group, {.tag = receive.tag});

    std::vector<TensorTree> outgoing;
    std::vector<WorkPtr> sends;
    // Sent in the reverse order of the tags (the two same-tag messages keep their order).
    for (int k = 2; k >= 0; --k) {
      outgoing.push_back(build_tree(defs, {2 + k}, distinct(group.rank(), 10 + k)));
      sends.push_back(outgoing.back().isend(right, group, {.tag = 1 + k}));
    }
    for (int seed : {20, 21}) {
      outgoing.push_back(build_tree(defs, {2}, distinct(group.rank(), seed), {.consolidated = seed == 20}));
      sends.push_back(outgoing.back().isend(right, group, {.tag = 4}));
    }
    for (auto it = receives.rbegin(); it != receives.rend(); ++it) it->work->wait();
    for (const WorkPtr& send : sends) send->wait();
    for (const Receive& receive : receives) {
      INFO("tag " << receive.tag << ", seed " << receive.seed);
      CHECK(tree_mismatch(receive.tree, defs, receive.batch, distinct(left, receive.seed)) == "");
    }
  });
}

TEST_CASE("tree irecv from kAnySource names each sender through the Work, and recv from kAnySource returns it",
          "[tree_comm]") {
  const Group& world = context().world();
  const std::vector<LeafDef> defs = rollout();
  const int n = world.size();
  const int rank = world.rank();
  for (const bool consolidated_receivers : {false, true}) {
    INFO("consolidated receivers " << consolidated_receivers);
    if (rank == 0) {
      std::vector<TensorTree> trees;
      std::vector<WorkPtr> works;
      for (int k = 1; k < n; ++k) {
        trees.push_back(build_tree(defs, kBatch, distinct(0, 95), {.reversed = true, .consolidated = consolidated_receivers}));
      }
      for (TensorTree& tree : trees) works.push_back(tree.irecv(kAnySource, world, {.tag = 9}));
      std::set<int> senders;
      for (std::size_t k = 0; k < trees.size(); ++k) {
        works[k]->wait();
        const int sender = works[k]->source_rank();
        senders.insert(sender);
        INFO("from rank " << sender);
        CHECK(tree_mismatch(trees[k], defs, kBatch, distinct(sender, 3)) == "");
      }
      CHECK(senders.size() == static_cast<std::size_t>(n - 1));
      CHECK((senders.empty() || (*senders.begin() == 1 && *senders.rbegin() == n - 1)));

      senders.clear();
      TensorTree tree = build_tree(defs, kBatch, distinct(0, 95), {.consolidated = consolidated_receivers});
      for (int k = 1; k < n; ++k) {
        const int sender = tree.recv(kAnySource, world, {.tag = 10});
        senders.insert(sender);
        INFO("from rank " << sender);
        CHECK(tree_mismatch(tree, defs, kBatch, distinct(sender, 4)) == "");
      }
      CHECK(senders.size() == static_cast<std::size_t>(n - 1));
    } else {
      build_tree(defs, kBatch, distinct(rank, 3), {.strided = true}).send(0, world, {.tag = 9});
      build_tree(defs, kBatch, distinct(rank, 4), {.consolidated = true}).send(0, world, {.tag = 10});
    }
    // A sender must not run ahead into the next round: its message could match this round's receive.
    barrier();
  }
}

TEST_CASE("tree send/recv in PerLeaf mode delivers every leaf, whatever the key order or strides of the receiver",
          "[tree_comm]") {
  const std::vector<LeafDef> defs = rollout();
  for_each_group([&](const Group& group) {
    for (const bool recv_consolidated : {false, true}) {
      INFO("receiver consolidated " << recv_consolidated);
      const TensorTree mine = build_tree(defs, kBatch, distinct(group.rank(), 5), {.strided = true});
      TensorTree into = build_tree(defs, kBatch, distinct(group.rank(), 96),
                                   {.reversed = true, .strided = !recv_consolidated, .consolidated = recv_consolidated});
      const WorkPtr sent = mine.isend(right_of(group), group, {.tag = 12, .mode = TransferMode::PerLeaf});
      into.irecv(left_of(group), group, {.tag = 12, .mode = TransferMode::PerLeaf})->wait();
      sent->wait();
      CHECK(tree_mismatch(into, defs, kBatch, distinct(left_of(group), 5)) == "");
      CHECK(into.is_consolidated() == recv_consolidated);
    }
  });
}

TEST_CASE("tree send/recv carries zero-size leaves and a tree whose batch size is zero", "[tree_comm]") {
  const Group& world = context().world();
  const int right = right_of(world);
  const int left = left_of(world);
  const std::vector<LeafDef> defs = with_empty_leaves();
  for (const Shape& batch : {Shape{3}, Shape{0}}) {
    for (const TransferMode mode : {TransferMode::Consolidated, TransferMode::PerLeaf}) {
      INFO("batch " << shape_str(batch) << (mode == TransferMode::PerLeaf ? ", per leaf" : ", consolidated"));
      const TensorTree mine = build_tree(defs, batch, distinct(world.rank(), 6), {.consolidated = true});
      TensorTree into = build_tree(defs, batch, distinct(world.rank(), 97), {.reversed = true});
      const WorkPtr sent = mine.isend(right, world, {.tag = 13, .mode = mode});
      into.recv(left, world, {.tag = 13, .mode = mode});
      sent->wait();
      CHECK(tree_mismatch(into, defs, batch, distinct(left, 6)) == "");
    }
  }
  // A tree without any leaf: only the header travels.
  const TensorTree none(Shape{2});
  TensorTree into(Shape{2});
  const WorkPtr sent = none.isend(right, world, {.tag = 14});
  CHECK(into.recv(left, world, {.tag = 14}) == left);
  sent->wait();
  CHECK(into.empty());
}

// ---- init_remote / from_remote_init -------------------------------------------------------------------

TEST_CASE("init_remote gives a receiver that knew nothing the sender's tree, and later send/recv update it",
          "[tree_comm]") {
  const Group& world = context().world();
  const int n = world.size();
  const int rank = world.rank();
  const std::vector<LeafDef> defs = rollout();
  // One sender at a time: rank s initialises rank s+1.
  for (int s = 0; s < n; ++s) {
    const int dst = (s + 1) % n;
    INFO("rank " << s << " initialises rank " << dst);
    const bool consolidated_sender = s % 2 == 1;
    if (rank == s) {
      const TensorTree tree = build_tree(defs, kBatch, distinct(s, 7), {.reversed = true, .strided = !consolidated_sender, .consolidated = consolidated_sender});
      tree.init_remote(dst, world, {.tag = 20});
      for (int step = 0; step < 3; ++step) {
        refill(tree, defs, kBatch, distinct(s, 30 + step));
        tree.send(dst, world, {.tag = 21});
      }
      CHECK(tree.is_consolidated() == consolidated_sender);
    }
    if (rank == dst) {
      TensorTree tree = TensorTree::from_remote_init(s, world, {.tag = 20});
      CHECK(tree.is_consolidated());
      CHECK(tree_mismatch(tree, defs, kBatch, distinct(s, 7)) == "");
      CHECK(tree.keys({.include_nested = true}) == build_tree(defs, kBatch, distinct(s, 7), {.reversed = true}).keys({.include_nested = true}));
      for (int step = 0; step < 3; ++step) {
        INFO("step " << step);
        const Tensor obs_before = tree.get("obs");
        CHECK(tree.recv(s, world, {.tag = 21}) == s);
        CHECK(tree_mismatch(tree, defs, kBatch, distinct(s, 30 + step)) == "");
        // A tensor taken from the (consolidated) tree keeps what the tree held before the receive.
        const LeafValue before = step == 0 ? distinct(s, 7) : distinct(s, 30 + step - 1);
        CHECK(mismatch(obs_before, DType::UInt8, {4, 3, 4, 4}, [&](std::int64_t i) { return before(0, DType::UInt8, i); }) == "");
      }
    }
    barrier();
  }
}

TEST_CASE("from_remote_init from kAnySource learns the sender's tree, zero-size leaves included", "[tree_comm]") {
  const Group& world = context().world();
  const std::vector<LeafDef> defs = with_empty_leaves();
  if (world.rank() == 1) {
    build_tree(defs, {2}, distinct(1, 8), {.consolidated = true}).init_remote(0, world, {.tag = 22});
  } else if (world.rank() == 0) {
    const TensorTree tree = TensorTree::from_remote_init(kAnySource, world, {.tag = 22});
    CHECK(tree_mismatch(tree, defs, {2}, distinct(1, 8)) == "");
  }
  barrier();
}

// What init_remote's use_broadcast option did before it was removed: broadcast into empty trees.
TEST_CASE("broadcast into empty trees gives every rank the root's tree, and later broadcasts update it",
          "[tree_comm]") {
  const std::vector<LeafDef> defs = rollout();
  for_each_group([&](const Group& group) {
    const int root = last_of(group);
    if (group.rank() == root) {
      TensorTree tree = build_tree(defs, kBatch, distinct(root, 9), {.reversed = true});
      tree.broadcast(root, group);
      CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 9)) == "");
      refill(tree, defs, kBatch, distinct(root, 10));
      tree.broadcast(root, group);
      CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 10)) == "");
    } else {
      TensorTree tree;
      tree.broadcast(root, group);
      CHECK(tree.is_consolidated());
      CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 9)) == "");
      const Tensor reward_before = tree.get("reward");
      tree.broadcast(root, group);
      CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 10)) == "");
      // The consolidated tree moved to the arrived buffer; the tensor taken from it kept the old one.
      CHECK(mismatch(reward_before, DType::Float32, {4}, [&](std::int64_t i) { return distinct(root, 9)(2, DType::Float32, i); }) == "");
    }
  });
}

// ---- broadcast -------------------------------------------------------------------------------------

TEST_CASE("broadcast writes the root's values into same-layout receivers in place, then a second broadcast "
          "(no schema resent) reaches both a same-layout and an empty receiver",
          "[tree_comm]") {
  const std::vector<LeafDef> defs = rollout();
  const Group group = fresh_world();
  const int root = last_of(group);
  const int rank = group.rank();
  TensorTree tree;
  if (rank == root) {
    tree = build_tree(defs, kBatch, distinct(root, 11));
  } else {
    // Consolidated on even ranks, strided views in the reverse key order on odd ones.
    tree = build_tree(defs, kBatch, distinct(rank, 98), {.reversed = rank % 2 == 1, .strided = rank % 2 == 1, .consolidated = rank % 2 == 0});
  }
  const bool was_consolidated = tree.is_consolidated();
  const std::vector<Path> keys = tree.keys({.include_nested = true});
  const Tensor obs_before = tree.get("obs");
  const Tensor return_before = tree.get("info.episode_return");
  TensorTree& same = tree.broadcast(root, group);
  CHECK(&same == &tree);
  CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 11)) == "");
  CHECK(tree.keys({.include_nested = true}) == keys);
  CHECK(tree.is_consolidated() == was_consolidated);
  // Tensors taken before: written in place with the tree's own leaves (and on the root, which
  // receives nothing); a consolidated receiver moved to the arrived buffer and they kept the old one.
  const LeafValue before = rank != root && was_consolidated ? distinct(rank, 98) : distinct(root, 11);
  CHECK(mismatch(obs_before, DType::UInt8, {4, 3, 4, 4}, [&](std::int64_t i) { return before(0, DType::UInt8, i); }) == "");
  CHECK(mismatch(return_before, DType::Float64, {4}, [&](std::int64_t i) { return before(6, DType::Float64, i); }) == "");

  // The second time: odd ranks start from an empty tree, the others keep theirs.
  if (rank == root) {
    refill(tree, defs, kBatch, distinct(root, 12));
  } else if (rank % 2 == 1) {
    tree = TensorTree();
  }
  tree.broadcast(root, group);
  CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 12)) == "");
  if (rank != root && rank % 2 == 1) CHECK(tree.is_consolidated());
}

TEST_CASE("broadcast gives receivers holding an empty tree a new consolidated tree, also the second time, "
          "when some receivers then hold the layout",
          "[tree_comm]") {
  const std::vector<LeafDef> defs = rollout();
  const Group group = fresh_world();
  const int root = last_of(group);
  const int rank = group.rank();
  TensorTree tree = rank == root ? build_tree(defs, kBatch, distinct(root, 13), {.consolidated = true}) : TensorTree();
  tree.broadcast(root, group);
  CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 13)) == "");
  CHECK(tree.is_consolidated());
  CHECK(tree.keys({.include_nested = true}) == build_tree(defs, kBatch, distinct(root, 13)).keys({.include_nested = true}));

  // Even ranks keep the tree they got, odd ranks start again from an empty one.
  if (rank == root) {
    refill(tree, defs, kBatch, distinct(root, 14));
  } else if (rank % 2 == 1) {
    tree = TensorTree();
  }
  const Tensor action_before = tree.empty() ? Tensor() : tree.get("action");
  tree.broadcast(root, group);
  CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 14)) == "");
  if (action_before.defined()) {
    // The receivers' trees are consolidated: they moved to the arrived buffer, the tensor kept the old one.
    const LeafValue before = rank == root ? distinct(root, 14) : distinct(root, 13);
    CHECK(mismatch(action_before, DType::Int64, {4}, [&](std::int64_t i) { return before(1, DType::Int64, i); }) == "");
  }
  // The root's tree is not changed by its own broadcast.
  if (rank == root) CHECK(tree_mismatch(tree, defs, kBatch, distinct(root, 14)) == "");
}

TEST_CASE("broadcast from every root in turn on every group reaches every member", "[tree_comm]") {
  const std::vector<LeafDef> defs = rollout();
  for_each_group([&](const Group& group) {
    TensorTree tree;
    for (int root = 0; root < group.size(); ++root) {
      INFO("root " << root);
      if (group.rank() == root) tree = build_tree(defs, {3}, distinct(root, 15), {.reversed = root % 2 == 0});
      tree.broadcast(root, group);
      CHECK(tree_mismatch(tree, defs, {3}, distinct(root, 15)) == "");
    }
  });
}

// ---- all_gather / gather / scatter -------------------------------------------------------------------

namespace {

// Rank r's tree in the gather and scatter tests: batch r+1, and on odd ranks one more leaf.
std::vector<LeafDef> defs_of_rank(int rank) {
  std::vector<LeafDef> defs = rollout();
  if (rank % 2 == 1) defs.push_back({{"extra", "odd"}, DType::Int16, {2}});
  return defs;
}

Shape batch_of_rank(int rank) { return {rank + 1}; }

TensorTree tree_of_rank(int rank, int seed, How how = {}) {
  return build_tree(defs_of_rank(rank), batch_of_rank(rank), distinct(rank, seed), how);
}

std::string tree_of_rank_mismatch(const TensorTree& tree, int rank, int seed) {
  return tree_mismatch(tree, defs_of_rank(rank), batch_of_rank(rank), distinct(rank, seed));
}

}  // namespace

TEST_CASE("all_gather returns every rank's tree in rank order, batch sizes and layouts differing per rank",
          "[tree_comm]") {
  for_each_group([](const Group& group) {
    const int rank = group.rank();
    for (int round = 0; round < 2; ++round) {
      INFO("round " << round);
      const TensorTree mine = tree_of_rank(rank, 16 + round, {.reversed = rank % 2 == 0, .consolidated = round == 1});
      const std::vector<TensorTree> all = mine.all_gather(group);
      REQUIRE(all.size() == static_cast<std::size_t>(group.size()));
      for (int r = 0; r < group.size(); ++r) {
        INFO("tree of rank " << r);
        CHECK(tree_of_rank_mismatch(all[static_cast<std::size_t>(r)], r, 16 + round) == "");
      }
      CHECK(tree_of_rank_mismatch(mine, rank, 16 + round) == "");
    }
  });
}

TEST_CASE("gather gives the destination every rank's tree in rank order and the others nothing", "[tree_comm]") {
  for_each_group([](const Group& group) {
    const int rank = group.rank();
    for (int dst = 0; dst < group.size(); ++dst) {
      INFO("dst " << dst);
      const TensorTree mine = tree_of_rank(rank, 18, {.strided = rank % 2 == 1});
      const std::vector<TensorTree> gathered = mine.gather(dst, group);
      if (rank == dst) {
        REQUIRE(gathered.size() == static_cast<std::size_t>(group.size()));
        for (int r = 0; r < group.size(); ++r) {
          INFO("tree of rank " << r);
          CHECK(tree_of_rank_mismatch(gathered[static_cast<std::size_t>(r)], r, 18) == "");
        }
      } else {
        CHECK(gathered.empty());
      }
    }
  });
}

TEST_CASE("scatter sends each rank its own tree from the root, into an empty or a same-layout tree", "[tree_comm]") {
  for_each_group([](const Group& group) {
    const int root = last_of(group);
    const int rank = group.rank();
    for (int round = 0; round < 2; ++round) {
      INFO("round " << round);
      std::vector<TensorTree> trees;
      if (rank == root) {
        for (int r = 0; r < group.size(); ++r) trees.push_back(tree_of_rank(r, 19 + round, {.consolidated = r % 2 == 0}));
      }
      // Even ranks hold an empty tree, odd ranks one of their own layout (reverse key order).
      TensorTree tree = rank % 2 == 0 ? TensorTree() : tree_of_rank(rank, 99, {.reversed = true});
      const Tensor reward_before = tree.empty() ? Tensor() : tree.get("reward");
      TensorTree& same = tree.scatter(root, trees, group);
      CHECK(&same == &tree);
      CHECK(tree_of_rank_mismatch(tree, rank, 19 + round) == "");
      if (reward_before.defined()) {
        CHECK(mismatch(reward_before, DType::Float32, batch_of_rank(rank), [&](std::int64_t i) { return distinct(rank, 19 + round)(2, DType::Float32, i); }) == "");
      }
      if (rank == root) {
        for (int r = 0; r < group.size(); ++r) CHECK(tree_of_rank_mismatch(trees[static_cast<std::size_t>(r)], r, 19 + round) == "");
      }
    }
  });
}

// ---- reduce / all_reduce -------------------------------------------------------------------------------

namespace {

// float Avg may divide or multiply by the reciprocal: one rounding apart.
double avg_tolerance(ReduceOp op) { return op == ReduceOp::Avg ? 1e-5 : 0.0; }

struct ReduceTreeCase {
  ReduceOp op;
  std::vector<LeafDef> defs;
  std::function<LeafValue(int)> value;
};

std::vector<ReduceTreeCase> reduce_tree_cases() {
  // Every dtype the rollout holds (float16, bfloat16 and bool included) with the ops all of them take.
  std::vector<ReduceTreeCase> cases;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) cases.push_back({op, rollout(true), small});
  // Product and Avg on the wider dtypes (uint8 products overflow, halves round).
  const std::vector<LeafDef> wide = {
      {{"a"}, DType::Float32, {3}}, {{"b", "c"}, DType::Float64, {}}, {{"b", "d"}, DType::Int64, {2}},
      {{"e"}, DType::Int32, {}},
  };
  for (ReduceOp op : {ReduceOp::Product, ReduceOp::Avg}) cases.push_back({op, wide, small});
  const std::vector<LeafDef> integral = {
      {{"u8"}, DType::UInt8, {3}}, {{"n", "i32"}, DType::Int32, {}}, {{"n", "i64"}, DType::Int64, {2}},
      {{"flag"}, DType::Bool, {2}},
  };
  for (ReduceOp op : {ReduceOp::BitwiseAnd, ReduceOp::BitwiseOr, ReduceOp::BitwiseXor}) {
    cases.push_back({op, integral, bits});
  }
  return cases;
}

}  // namespace

TEST_CASE("all_reduce combines every rank's tree in place with every reduce op, over mixed dtypes", "[tree_comm]") {
  for_each_group([](const Group& group) {
    const int rank = group.rank();
    for (const ReduceTreeCase& c : reduce_tree_cases()) {
      INFO(c.op);
      // Consolidated on even ranks, strided views in another key order on odd ones.
      TensorTree tree = build_tree(c.defs, kBatch, c.value(rank), {.reversed = rank % 2 == 1, .strided = rank % 2 == 1, .consolidated = rank % 2 == 0});
      const Tensor first_before = tree.get(c.defs.front().path);
      tree.all_reduce(group, c.op);
      const LeafValue expected = reduced_value(c.op, group.size(), c.value);
      CHECK(tree_mismatch(tree, c.defs, kBatch, expected, avg_tolerance(c.op)) == "");
      CHECK(tree.is_consolidated() == (rank % 2 == 0));
      CHECK(mismatch(first_before, c.defs.front().dtype, shape_of(c.defs.front(), kBatch),
                     [&](std::int64_t i) { return expected(0, c.defs.front().dtype, i); }, avg_tolerance(c.op)) == "");
    }
  });
}

TEST_CASE("reduce leaves the result on the destination only; the other ranks' trees are unchanged", "[tree_comm]") {
  for_each_group([](const Group& group) {
    const int rank = group.rank();
    const int dst = last_of(group);
    for (const ReduceTreeCase& c : reduce_tree_cases()) {
      INFO(c.op);
      TensorTree tree = build_tree(c.defs, kBatch, c.value(rank), {.reversed = rank % 2 == 0, .consolidated = rank % 2 == 1});
      tree.reduce(dst, group, c.op);
      if (rank == dst) {
        CHECK(tree_mismatch(tree, c.defs, kBatch, reduced_value(c.op, group.size(), c.value), avg_tolerance(c.op)) == "");
      } else {
        CHECK(tree_mismatch(tree, c.defs, kBatch, c.value(rank)) == "");
      }
    }
  });
}

// ---- errors: the receiver's tree is left as it was -----------------------------------------------------

namespace {

// The receiver in the error tests: two leaves in two dtype buckets (256 + 64 payload bytes).
const std::vector<LeafDef> kTarget = {{{"a"}, DType::Float32, {16}}, {{"b"}, DType::Int64, {}}};

// Sender layouts of the receiver's byte length that differ in one respect each.
struct Variant {
  const char* name;
  std::vector<LeafDef> defs;
};
std::vector<Variant> same_length_variants() {
  return {
      {"dtype", {{{"a"}, DType::Int32, {16}}, {{"b"}, DType::Int64, {}}}},
      {"shape", {{{"a"}, DType::Float32, {8, 2}}, {{"b"}, DType::Int64, {}}}},
      {"key", {{{"c"}, DType::Float32, {16}}, {{"b"}, DType::Int64, {}}}},
      {"nesting", {{{"x", "a"}, DType::Float32, {16}}, {{"b"}, DType::Int64, {}}}},
  };
}

// Rank 0 sends, rank 1 receives; the others sit these tests out.
bool in_pair() { return world_rank() < 2; }

// The wire bytes rank 0's consolidated `tree` sends (payload and header), captured by sending it to itself.
Tensor wire_bytes_of(const TensorTree& tree, const Group& group) {
  const Tensor raw = Tensor::zeros({static_cast<std::int64_t>(tree.consolidate().schema()->total_bytes() + kWireHeaderBytes)}, {DType::UInt8});
  const WorkPtr sent = tree.isend(group.rank(), group, {.tag = 60});
  dist::recv(raw, group.rank(), group, {.tag = 60});
  sent->wait();
  return raw;
}

Tensor flipped(const Tensor& bytes, std::int64_t at) {
  Tensor copy = bytes.clone();
  copy.data<std::uint8_t>()[at] ^= 0x5a;
  return copy;
}

}  // namespace

TEST_CASE("recv rejects a tree of another layout but the same byte length: SchemaMismatch naming both "
          "fingerprints, receiver unchanged, the message dropped and the next one received",
          "[tree_comm]") {
  const Group& world = context().world();
  if (!in_pair()) return;
  for (const Variant& variant : same_length_variants()) {
    for (const bool consolidated : {false, true}) {
      INFO("differs in " << variant.name << ", receiver consolidated " << consolidated);
      const TensorTree sender = build_tree(variant.defs, kBatch, distinct(0, 40));
      if (world.rank() == 0) {
        CHECK(sender.consolidate().schema()->total_bytes() == build_tree(kTarget, kBatch, distinct(0, 1)).consolidate().schema()->total_bytes());
        sender.send(1, world, {.tag = 30});
        build_tree(kTarget, kBatch, distinct(0, 45)).send(1, world, {.tag = 30});
        continue;
      }
      TensorTree into = build_tree(kTarget, kBatch, distinct(1, 41), {.consolidated = consolidated});
      const Caught error = caught<SchemaMismatch>([&] { into.recv(0, world, {.tag = 30}); });
      INFO(error.message);
      CHECK(error.thrown);
      CHECK(error.message.find(layout_name(into)) != std::string::npos);
      CHECK(error.message.find(layout_name(sender)) != std::string::npos);
      CHECK(error.message.find("the message is dropped: the next recv from rank 0 (tag 30) takes the message sent "
                               "after it") != std::string::npos);
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(1, 41)) == "");
      CHECK(into.is_consolidated() == consolidated);
      into.recv(0, world, {.tag = 30});
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(0, 45)) == "");
    }
  }
}

TEST_CASE("in debug mode, recv into a tree of another layout names the first key that differs, whatever the "
          "byte lengths, and the pair goes on",
          "[tree_comm]") {
  const Group& world = context().world();
  const Group checked = context().new_group(world.world_ranks(), GroupOptions{.debug_checks = true});
  if (!in_pair()) return;
  std::vector<Variant> variants = same_length_variants();
  variants.push_back({"length", {{{"a"}, DType::Float32, {32}}, {{"b"}, DType::Int64, {}}}});
  for (const Variant& variant : variants) {
    INFO("differs in " << variant.name);
    if (world.rank() == 0) {
      build_tree(variant.defs, kBatch, distinct(0, 62)).send(1, checked, {.tag = 62});
      build_tree(kTarget, kBatch, distinct(0, 63)).send(1, checked, {.tag = 62});
      continue;
    }
    TensorTree into = build_tree(kTarget, kBatch, distinct(1, 64), {.consolidated = true});
    const Caught error = caught<SchemaMismatch>([&] { into.recv(0, checked, {.tag = 62}); });
    INFO(error.message);
    CHECK(error.thrown);
    // This tree's (kTarget's) leaf 'a' is where each variant differs: another dtype, shape or
    // length there, or no such key.
    CHECK(error.message.find("at key 'a': ") != std::string::npos);
    CHECK(error.message.find(layout_name(into)) != std::string::npos);
    CHECK(tree_mismatch(into, kTarget, kBatch, distinct(1, 64)) == "");
    CHECK(into.recv(0, checked, {.tag = 62}) == 0);
    CHECK(tree_mismatch(into, kTarget, kBatch, distinct(0, 63)) == "");
  }
}

TEST_CASE("recv rejects a tree of another byte length, shorter or longer, with SchemaMismatch, receiver unchanged, "
          "the message dropped and the next one received",
          "[tree_comm]") {
  const Group& world = context().world();
  if (!in_pair()) return;
  const std::vector<Variant> variants = {
      {"shorter", {{{"a"}, DType::Float32, {8}}, {{"b"}, DType::Int64, {}}}},
      {"longer", {{{"a"}, DType::Float32, {32}}, {{"b"}, DType::Int64, {}}}},
  };
  for (const Variant& variant : variants) {
    for (const bool consolidated : {false, true}) {
      INFO(variant.name << ", receiver consolidated " << consolidated);
      if (world.rank() == 0) {
        build_tree(variant.defs, kBatch, distinct(0, 42)).send(1, world, {.tag = 31});
        build_tree(kTarget, kBatch, distinct(0, 46)).send(1, world, {.tag = 31});
        continue;
      }
      TensorTree into = build_tree(kTarget, kBatch, distinct(1, 43), {.consolidated = consolidated});
      const Caught error = caught<SchemaMismatch>([&] { into.recv(0, world, {.tag = 31}); });
      INFO(error.message);
      CHECK(error.thrown);
      CHECK(error.message.find("the message is dropped") != std::string::npos);
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(1, 43)) == "");
      into.recv(0, world, {.tag = 31});
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(0, 46)) == "");
    }
  }
}

TEST_CASE("a tree copied out of a pool of irecv trees keeps every element through 100 more receives into the pool",
          "[tree_comm]") {
  const Group& world = context().world();
  if (!in_pair()) return;
  const std::vector<LeafDef> defs = rollout();
  constexpr int kPool = 4;
  constexpr int kKept = 4;
  constexpr int kTrees = kKept + 100;
  if (world.rank() == 0) {
    const TensorTree tree = build_tree(defs, kBatch, distinct(0, 200), {.consolidated = true});
    for (int step = 0; step < kTrees; ++step) {
      refill(tree, defs, kBatch, distinct(0, 200 + step));
      tree.send(1, world, {.tag = 161});
    }
    return;
  }
  std::vector<TensorTree> pool;
  for (int slot = 0; slot < kPool; ++slot) pool.push_back(build_tree(defs, kBatch, distinct(1, 300), {.consolidated = true}));
  std::vector<WorkPtr> posted;
  for (TensorTree& tree : pool) posted.push_back(tree.irecv(0, world, {.tag = 161}));
  std::vector<TensorTree> kept;
  for (int step = 0; step < kTrees; ++step) {
    const auto slot = static_cast<std::size_t>(step % kPool);
    posted[slot]->wait();
    CHECK(tree_mismatch(pool[slot], defs, kBatch, distinct(0, 200 + step)) == "");
    if (step < kKept) kept.push_back(pool[slot]);
    if (step + kPool < kTrees) posted[slot] = pool[slot].irecv(0, world, {.tag = 161});
  }
  for (int k = 0; k < kKept; ++k) {
    INFO("the tree kept at step " << k);
    CHECK(tree_mismatch(kept[static_cast<std::size_t>(k)], defs, kBatch, distinct(0, 200 + k)) == "");
  }
}

TEST_CASE("tree send and recv reject ranks outside the group and kAnySource in PerLeaf mode with InvalidArgument",
          "[tree_comm]") {
  const Group& world = context().world();
  const int n = world.size();
  TensorTree tree = build_tree(kTarget, kBatch, distinct(world.rank(), 44));
  for (const int bad : {n, -2, 1 << 20}) {
    INFO("rank " << bad);
    CHECK(unless_thrown<InvalidArgument>([&] { tree.recv(bad, world); }) == "");
    CHECK(unless_thrown<InvalidArgument>([&] { (void)tree.irecv(bad, world); }) == "");
    CHECK(unless_thrown<InvalidArgument>([&] { tree.send(bad, world); }) == "");
    CHECK(unless_thrown<InvalidArgument>([&] { (void)tree.isend(bad, world); }) == "");
    CHECK(unless_thrown<InvalidArgument>([&] { tree.init_remote(bad, world); }) == "");
    CHECK(unless_thrown<InvalidArgument>([&] { TensorTree::from_remote_init(bad, world); }) == "");
  }
  CHECK(unless_thrown<InvalidArgument>([&] { tree.send(kAnySource, world); }) == "");
  CHECK(unless_thrown<InvalidArgument>([&] { (void)tree.irecv(kAnySource, world, {.mode = TransferMode::PerLeaf}); }) == "");
  CHECK(unless_thrown<InvalidArgument>([&] { (void)tree.irecv(0, world, {.tag = -1}); }) == "");
  CHECK(unless_thrown<InvalidArgument>([&] { (void)tree.isend(0, world, {.tag = dist::kMaxUserTag + 1}); }) == "");
  CHECK(tree_mismatch(tree, kTarget, kBatch, distinct(world.rank(), 44)) == "");
}

TEST_CASE("irecv from a rank that sends nothing times out leaving the tree unchanged; the receive is then "
          "satisfied later, or cancelled by dropping its Work",
          "[tree_comm]") {
  const Group& world = context().world();
  const int rank = world.rank();
  for (const bool consolidated : {false, true}) {
    INFO("receiver consolidated " << consolidated);
    TensorTree into = build_tree(kTarget, kBatch, distinct(rank, 45), {.consolidated = consolidated});
    // Satisfied later: the same Work completes once rank 0 has sent.
    WorkPtr pending;
    if (rank == 1) {
      pending = into.irecv(0, world, {.tag = 32});
      CHECK(unless_thrown<Timeout>([&] { pending->wait(std::chrono::milliseconds(200)); }) == "");
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(1, 45)) == "");
    }
    barrier();
    if (rank == 0) build_tree(kTarget, kBatch, distinct(0, 46)).send(1, world, {.tag = 32});
    if (rank == 1) {
      CHECK_NOTHROW(pending->wait(std::chrono::seconds(20)));
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(0, 46)) == "");
    }
    barrier();

    // Cancelled: a dropped Work's receive takes nothing, so the next message reaches a new receive.
    if (rank == 1) {
      pending = into.irecv(0, world, {.tag = 33});
      CHECK(unless_thrown<Timeout>([&] { pending->wait(std::chrono::milliseconds(200)); }) == "");
      pending.reset();
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(0, 46)) == "");
    }
    barrier();
    if (rank == 0) build_tree(kTarget, kBatch, distinct(0, 47)).send(1, world, {.tag = 33});
    if (rank == 1) {
      pending = into.irecv(0, world, {.tag = 33});
      CHECK_NOTHROW(pending->wait(std::chrono::seconds(20)));
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(0, 47)) == "");
    }
    barrier();
  }
}

TEST_CASE("a consolidated transfer is the payload followed by the 64-byte wire header laid out as transfer.hpp "
          "documents",
          "[tree_comm]") {
  const Group& world = context().world();
  const TensorTree tree = build_tree(rollout(), kBatch, distinct(world.rank(), 61), {.consolidated = true});
  const std::uint64_t total = tree.schema()->total_bytes();
  const Tensor wire = wire_bytes_of(tree, world);
  REQUIRE(wire.nbytes() == total + kWireHeaderBytes);
  const auto* bytes = wire.data<std::uint8_t>();
  // The payload is the consolidated buffer as the schema lays it out.
  CHECK(std::memcmp(bytes, tree.storage()->data(), total) == 0);
  const std::uint8_t* header = bytes + total;
  const auto little = [&](std::size_t at, std::size_t width) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) value |= std::uint64_t{header[at + i]} << (8 * i);
    return value;
  };
  CHECK(std::string(reinterpret_cast<const char*>(header), 4) == "TTWH");
  CHECK(little(4, 4) == kWireVersion);
  CHECK(little(8, 8) == tree.schema()->fingerprint());
  CHECK(little(16, 8) == total);
  CHECK(little(24, 8) == 0);  // no schema behind a point-to-point header
  CHECK(little(32, 8) == XXH3_64bits(header, 32));
  std::size_t nonzero = 0;
  for (std::size_t i = 40; i < kWireHeaderBytes; ++i) nonzero += header[i] != 0 ? 1 : 0;
  CHECK(nonzero == 0);
}

TEST_CASE("recv rejects a corrupted wire header with CorruptData and leaves the receiver unchanged", "[tree_comm]") {
  const Group& world = context().world();
  if (!in_pair()) return;
  // Bytes of the header (behind the payload) to corrupt: the magic, the version, the fingerprint and
  // the payload length (both under the checksum), and the last reserved byte.
  const std::vector<std::pair<const char*, std::int64_t>> corruptions = {
      {"magic", 0}, {"version", 4}, {"fingerprint", 8}, {"payload length", 16}, {"reserved", 63}};
  const TensorTree sender = build_tree(kTarget, kBatch, distinct(0, 48), {.consolidated = true});
  const auto total = static_cast<std::int64_t>(sender.schema()->total_bytes());
  Tensor genuine;
  if (world.rank() == 0) genuine = wire_bytes_of(sender, world);
  for (const bool consolidated : {false, true}) {
    for (const auto& [name, at] : corruptions) {
      INFO(name << ", receiver consolidated " << consolidated);
      if (world.rank() == 0) {
        dist::send(flipped(genuine, total + at), 1, world, {.tag = 34});
        continue;
      }
      TensorTree into = build_tree(kTarget, kBatch, distinct(1, 49), {.consolidated = consolidated});
      const Caught error = caught<CorruptData>([&] { into.recv(0, world, {.tag = 34}); });
      INFO(error.message);
      CHECK(error.thrown);
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(1, 49)) == "");
    }
    // The genuine bytes, sent the same way, are accepted: the forged messages differ in one byte only.
    if (world.rank() == 0) {
      dist::send(genuine, 1, world, {.tag = 34});
    } else {
      TensorTree into = build_tree(kTarget, kBatch, distinct(1, 49), {.consolidated = consolidated});
      into.recv(0, world, {.tag = 34});
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(0, 48)) == "");
    }
  }
}

TEST_CASE("recv rejects a truncated message (header cut short, header missing, empty) with SchemaMismatch and "
          "leaves the receiver unchanged",
          "[tree_comm]") {
  const Group& world = context().world();
  if (!in_pair()) return;
  const TensorTree sender = build_tree(kTarget, kBatch, distinct(0, 50), {.consolidated = true});
  const auto total = static_cast<std::int64_t>(sender.schema()->total_bytes());
  Tensor genuine;
  if (world.rank() == 0) genuine = wire_bytes_of(sender, world);
  const std::vector<std::pair<const char*, std::int64_t>> lengths = {
      {"one byte short", total + 63}, {"payload only", total}, {"ten bytes", 10}, {"empty", 0}};
  for (const bool consolidated : {false, true}) {
    for (const auto& [name, length] : lengths) {
      INFO(name << ", receiver consolidated " << consolidated);
      if (world.rank() == 0) {
        dist::send(genuine.slice(0, {0, length}).clone(), 1, world, {.tag = 35});
        continue;
      }
      TensorTree into = build_tree(kTarget, kBatch, distinct(1, 51), {.consolidated = consolidated});
      const Caught error = caught<SchemaMismatch>([&] { into.recv(0, world, {.tag = 35}); });
      INFO(error.message);
      CHECK(error.thrown);
      CHECK(tree_mismatch(into, kTarget, kBatch, distinct(1, 51)) == "");
    }
  }
}

TEST_CASE("from_remote_init rejects a corrupted schema message, and a corrupted or truncated data message, "
          "with CorruptData or SchemaMismatch",
          "[tree_comm]") {
  const Group& world = context().world();
  if (!in_pair()) return;
  const TensorTree sender = build_tree(kTarget, kBatch, distinct(0, 52), {.consolidated = true});
  if (world.rank() == 0) {
    const Tensor genuine = wire_bytes_of(sender, world);
    const std::vector<std::byte> encoded = sender.schema()->encode();
    Tensor schema = Tensor::empty({static_cast<std::int64_t>(encoded.size())}, {DType::UInt8});
    std::memcpy(schema.data_ptr(), encoded.data(), encoded.size());
    const auto total = static_cast<std::int64_t>(sender.schema()->total_bytes());

    dist::send(filled({100}, DType::UInt8, [](std::int64_t i) { return (i * 7 + 3) % 256; }), 1, world, {.tag = 36});
    dist::send(flipped(schema, static_cast<std::int64_t>(encoded.size()) - 1), 1, world, {.tag = 37});
    dist::send(schema, 1, world, {.tag = 38});
    dist::send(flipped(genuine, total), 1, world, {.tag = 38});
    dist::send(schema, 1, world, {.tag = 39});
    dist::send(genuine.slice(0, {0, total}).clone(), 1, world, {.tag = 39});
    dist::send(schema, 1, world, {.tag = 40});
    dist::send(genuine, 1, world, {.tag = 40});
  } else {
    CHECK(unless_thrown<CorruptData>([&] { TensorTree::from_remote_init(0, world, {.tag = 36}); }) == "");
    CHECK(unless_thrown<CorruptData>([&] { TensorTree::from_remote_init(0, world, {.tag = 37}); }) == "");
    CHECK(unless_thrown<CorruptData>([&] { TensorTree::from_remote_init(0, world, {.tag = 38}); }) == "");
    CHECK(unless_thrown<SchemaMismatch>([&] { TensorTree::from_remote_init(0, world, {.tag = 39}); }) == "");
    // The genuine pair still works.
    CHECK(tree_mismatch(TensorTree::from_remote_init(0, world, {.tag = 40}), kTarget, kBatch, distinct(0, 52)) == "");
  }
}

TEST_CASE("all_reduce and reduce with another layout on one rank are SchemaMismatch on every rank, without a "
          "hang, and the group works afterwards",
          "[tree_comm]") {
  for_each_group([](const Group& group) {
    const int rank = group.rank();
    const int odd_one = last_of(group);
    for (const Variant& variant : same_length_variants()) {
      for (const bool reduce_to_dst : {false, true}) {
        INFO("differs in " << variant.name << (reduce_to_dst ? ", reduce" : ", all_reduce"));
        const std::vector<LeafDef>& defs = rank == odd_one ? variant.defs : kTarget;
        TensorTree tree = build_tree(defs, kBatch, distinct(rank, 53), {.consolidated = rank % 2 == 0});
        const Caught error = caught<SchemaMismatch>([&] {
          if (reduce_to_dst) {
            tree.reduce(0, group);
          } else {
            tree.all_reduce(group);
          }
        });
        const bool as_expected = group.size() == 1 || error.thrown;
        INFO(error.message);
        CHECK(as_expected);
        CHECK(tree_mismatch(tree, defs, kBatch, distinct(rank, 53)) == "");
        dist::barrier(group);
      }
    }
    // A different byte length is caught the same way.
    const std::vector<LeafDef> longer = {{{"a"}, DType::Float32, {32}}, {{"b"}, DType::Int64, {}}};
    TensorTree tree = build_tree(rank == odd_one ? longer : kTarget, kBatch, distinct(rank, 54));
    if (group.size() > 1) CHECK(unless_thrown<SchemaMismatch>([&] { tree.all_reduce(group); }) == "");
    dist::barrier(group);
    // Nothing was left in flight: the next all_reduce succeeds.
    TensorTree good = build_tree(kTarget, kBatch, small(rank));
    good.all_reduce(group, ReduceOp::Sum);
    CHECK(tree_mismatch(good, kTarget, kBatch, reduced_value(ReduceOp::Sum, group.size(), small)) == "");
  });
}

TEST_CASE("broadcast into a tree of another layout is SchemaMismatch on that rank only; the others receive and "
          "the group works afterwards",
          "[tree_comm]") {
  for_each_group([](const Group& group) {
    if (group.size() < 2) return;
    const int root = last_of(group);
    const int rank = group.rank();
    const int wrong = 0;  // never the root when the group has two ranks or more
    for (const Variant& variant : same_length_variants()) {
      INFO("differs in " << variant.name);
      const std::vector<LeafDef>& defs = rank == wrong ? variant.defs : kTarget;
      TensorTree tree = build_tree(defs, kBatch, distinct(rank, rank == root ? 55 : 56), {.consolidated = rank % 2 == 1});
      if (rank == wrong) {
        const Caught error = caught<SchemaMismatch>([&] { tree.broadcast(root, group); });
        INFO(error.message);
        CHECK(error.thrown);
        // Each variant's first leaf is where it differs from kTarget (a dtype, a shape, a key, a nesting).
        CHECK(error.message.find("at key '" + path_str(variant.defs[0].path) + "': ") != std::string::npos);
        CHECK(tree_mismatch(tree, defs, kBatch, distinct(rank, 56)) == "");
      } else {
        tree.broadcast(root, group);
        CHECK(tree_mismatch(tree, kTarget, kBatch, distinct(root, 55)) == "");
      }
      dist::barrier(group);
    }
    TensorTree tree = rank == root ? build_tree(kTarget, kBatch, distinct(root, 57)) : TensorTree();
    tree.broadcast(root, group);
    CHECK(tree_mismatch(tree, kTarget, kBatch, distinct(root, 57)) == "");
  });
}

TEST_CASE("scatter from a root with the wrong number of trees, and collectives with a root outside the group, "
          "are InvalidArgument on every rank without a hang",
          "[tree_comm]") {
  for_each_group([](const Group& group) {
    const int root = last_of(group);
    const int rank = group.rank();
    for (const int count : {group.size() - 1, group.size() + 1}) {
      INFO(count << " trees");
      std::vector<TensorTree> trees;
      if (rank == root) {
        for (int r = 0; r < count; ++r) trees.push_back(build_tree(kTarget, kBatch, distinct(r, 58)));
      }
      TensorTree tree = build_tree(kTarget, kBatch, distinct(rank, 59));
      CHECK(unless_thrown<InvalidArgument>([&] { tree.scatter(root, trees, group); }) == "");
      CHECK(tree_mismatch(tree, kTarget, kBatch, distinct(rank, 59)) == "");
      dist::barrier(group);
    }
    TensorTree tree = build_tree(kTarget, kBatch, distinct(rank, 60));
    const std::vector<TensorTree> none;
    for (const int bad : {group.size(), -1}) {
      INFO("root " << bad);
      CHECK(unless_thrown<InvalidArgument>([&] { tree.broadcast(bad, group); }) == "");
      CHECK(unless_thrown<InvalidArgument>([&] { tree.gather(bad, group); }) == "");
      CHECK(unless_thrown<InvalidArgument>([&] { tree.scatter(bad, none, group); }) == "");
      CHECK(unless_thrown<InvalidArgument>([&] { tree.reduce(bad, group); }) == "");
    }
    CHECK(tree_mismatch(tree, kTarget, kBatch, distinct(rank, 60)) == "");
    dist::barrier(group);
  });
}
