#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <xxhash.h>

#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"

using namespace tensortree;
using Catch::Matchers::Contains;

namespace {

NodeSpec node(Path path, Shape batch_size, std::vector<std::string> keys) {
  return {std::move(path), std::move(batch_size), std::move(keys)};
}

LeafPlan leaf(Path path, DType dtype, Shape shape) { return {std::move(path), dtype, std::move(shape)}; }

// The what() of the E that fn throws; fails the test if fn throws nothing.
template <class E, class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception, none was thrown");
  return {};
}

Schema round_trip(const Schema& schema) { return Schema::decode(schema.encode()); }

// The same leaves, paths included, in the same layout order.
void check_same_leaves(const Schema& a, const Schema& b) {
  CHECK(a.leaves() == b.leaves());
  REQUIRE(a.leaves().size() == b.leaves().size());
  for (std::size_t i = 0; i < a.leaves().size(); ++i) CHECK(a.leaf_path(i) == b.leaf_path(i));
}

// batch [4]: obs, action, next{reward, done, obs}
std::vector<NodeSpec> rollout_nodes() {
  return {node({}, {4}, {"obs", "action", "next"}), node({"next"}, {4}, {"reward", "done", "obs"})};
}
std::vector<LeafPlan> rollout_leaves() {
  return {leaf({"obs"}, DType::Float32, {4, 3}), leaf({"action"}, DType::Int64, {4}),
          leaf({"next", "reward"}, DType::Float32, {4, 1}), leaf({"next", "done"}, DType::Bool, {4}),
          leaf({"next", "obs"}, DType::Float32, {4, 3})};
}
Schema rollout(DeviceType device = DeviceType::CPU) { return Schema::plan(rollout_nodes(), rollout_leaves(), device); }

std::uint64_t read_le(const std::vector<std::byte>& bytes, std::size_t at, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = width; i-- > 0;) value = (value << 8) | std::to_integer<std::uint64_t>(bytes[at + i]);
  return value;
}

}  // namespace

TEST_CASE("plan groups leaves by dtype in enum order, sorts paths within a bucket, aligns each to 64 bytes") {
  const Schema schema = rollout();
  struct Expected {
    Path path;
    DType dtype;
    std::uint64_t offset, nbytes;
  };
  const std::vector<Expected> expected = {
      {{"next", "done"}, DType::Bool, 0, 4},        {{"action"}, DType::Int64, 64, 32},
      {{"next", "obs"}, DType::Float32, 128, 48},   {{"next", "reward"}, DType::Float32, 192, 16},
      {{"obs"}, DType::Float32, 256, 48},
  };
  REQUIRE(schema.leaves().size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("leaf " << i);
    CHECK(schema.leaf_path(i) == expected[i].path);
    CHECK(schema.leaves()[i].dtype == expected[i].dtype);
    CHECK(schema.leaves()[i].offset == expected[i].offset);
    CHECK(schema.leaves()[i].nbytes == expected[i].nbytes);
  }
  CHECK(schema.total_bytes() == 320);  // 256 + 48 rounded up to 64
}

TEST_CASE("each dtype bucket spans its first leaf's start to its last leaf's end") {
  const Schema schema = rollout();
  const std::vector<DTypeBucket> expected = {
      {DType::Bool, 0, 4, 0, 1}, {DType::Int64, 64, 32, 1, 1}, {DType::Float32, 128, 176, 2, 3}};
  CHECK(schema.buckets() == expected);
  REQUIRE(schema.find_bucket(DType::Int64) != nullptr);
  CHECK(schema.find_bucket(DType::Int64)->offset == 64);
  CHECK(schema.find_bucket(DType::Float64) == nullptr);
}

TEST_CASE("a tree with no leaves needs no bytes and has no buckets") {
  const Schema schema = Schema::plan({node({}, {2}, {})}, {}, DeviceType::CPU);
  CHECK(schema.total_bytes() == 0);
  CHECK(schema.buckets().empty());
  CHECK(round_trip(schema) == schema);
}

TEST_CASE("every dtype gets nbytes = numel * itemsize and survives encode then decode") {
  std::vector<std::string> keys;
  std::vector<LeafPlan> leaves;
  for (auto it = kAllDTypes.rbegin(); it != kAllDTypes.rend(); ++it) {  // reverse: plan must reorder
    keys.emplace_back(dtype_name(*it));
    leaves.push_back(leaf({keys.back()}, *it, {2, 3}));
  }
  const Schema schema = Schema::plan({node({}, {2}, keys)}, leaves, DeviceType::CPU);
  REQUIRE(schema.leaves().size() == kAllDTypes.size());
  REQUIRE(schema.buckets().size() == kAllDTypes.size());
  std::uint64_t next_slot = 0;
  for (std::size_t i = 0; i < kAllDTypes.size(); ++i) {
    const LeafSpec& spec = schema.leaves()[i];
    INFO(dtype_name(kAllDTypes[i]));
    CHECK(spec.dtype == kAllDTypes[i]);
    CHECK(spec.nbytes == 6 * itemsize(kAllDTypes[i]));
    CHECK(spec.offset == next_slot);
    next_slot += spec.nbytes <= 64 ? 64 : 128;  // complex128's 96 bytes take two slots
  }
  const Schema decoded = round_trip(schema);
  CHECK(decoded == schema);
  CHECK(decoded.fingerprint() == schema.fingerprint());
  CHECK(decoded.buckets() == schema.buckets());
}

TEST_CASE("zero-size leaves take no bytes, share the next aligned offset, and round-trip") {
  const Schema schema = Schema::plan({node({}, {2}, {"a", "empty", "empty2", "z"})},
                                     {leaf({"a"}, DType::Float32, {2, 5}), leaf({"empty"}, DType::Float32, {2, 0}),
                                      leaf({"empty2"}, DType::Float32, {2, 0, 7}), leaf({"z"}, DType::Float32, {2})},
                                     DeviceType::CPU);
  const LeafSpec* empty = schema.find_leaf({"empty"});
  const LeafSpec* empty2 = schema.find_leaf({"empty2"});
  REQUIRE(empty != nullptr);
  REQUIRE(empty2 != nullptr);
  CHECK(empty->nbytes == 0);
  CHECK(empty2->nbytes == 0);
  CHECK(empty->offset == 64);  // "a" ends at 40
  CHECK(empty2->offset == 64);
  CHECK(schema.find_leaf({"z"})->offset == 64);
  CHECK(schema.total_bytes() == 128);
  CHECK(round_trip(schema) == schema);

  const Schema all_empty =
      Schema::plan({node({}, {0}, {"x", "y"})}, {leaf({"x"}, DType::Int64, {0, 3}), leaf({"y"}, DType::Bool, {0})},
                   DeviceType::CPU);
  CHECK(all_empty.total_bytes() == 0);
  CHECK(all_empty.buckets().size() == 2);
  CHECK(round_trip(all_empty) == all_empty);
}

TEST_CASE("leaves whose shape is only the batch dims round-trip") {
  const Schema schema = Schema::plan({node({}, {3, 2}, {"mask", "sub"}), node({"sub"}, {3, 2, 4}, {"id"})},
                                     {leaf({"mask"}, DType::Bool, {3, 2}), leaf({"sub", "id"}, DType::Int32, {3, 2, 4})},
                                     DeviceType::CPU);
  CHECK(schema.find_leaf({"mask"})->nbytes == 6);
  CHECK(schema.find_leaf({"sub", "id"})->nbytes == 96);
  CHECK(round_trip(schema) == schema);
}

TEST_CASE("empty sub-trees keep their batch size through a round trip") {
  const Schema schema = Schema::plan(
      {node({}, {5}, {"x", "empty"}), node({"empty"}, {5, 2}, {"deeper"}), node({"empty", "deeper"}, {5, 2}, {})},
      {leaf({"x"}, DType::Float64, {5})}, DeviceType::CPU);
  const Schema decoded = round_trip(schema);
  CHECK(decoded == schema);
  REQUIRE(decoded.find_node({"empty", "deeper"}) != nullptr);
  CHECK(decoded.find_node({"empty", "deeper"})->batch_size == Shape{5, 2});
  CHECK(decoded.find_node({"empty", "deeper"})->keys.empty());
}

TEST_CASE("four levels of nesting keep every level's batch size and keys through a round trip") {
  const Schema schema = Schema::plan({node({"a", "b", "c", "d"}, {2, 3, 4, 5}, {"x"}),
                                      node({"a", "b", "c"}, {2, 3, 4}, {"d"}), node({"a", "b"}, {2, 3}, {"c"}),
                                      node({"a"}, {2}, {"b", "top"}), node({}, {2}, {"a"})},
                                     {leaf({"a", "b", "c", "d", "x"}, DType::UInt16, {2, 3, 4, 5, 6}),
                                      leaf({"a", "top"}, DType::UInt16, {2})},
                                     DeviceType::CPU);
  const Schema decoded = round_trip(schema);
  CHECK(decoded == schema);
  CHECK(decoded.find_node({"a", "b", "c", "d"})->batch_size == Shape{2, 3, 4, 5});
  CHECK(decoded.find_node({"a", "b", "c"})->keys == std::vector<std::string>{"d"});
  CHECK(decoded.find_leaf({"a", "b", "c", "d", "x"})->nbytes == 2 * 3 * 4 * 5 * 6 * 2);
  CHECK(decoded.find_leaf({"a", "b", "c", "d", "x"})->offset == 0);  // sorts before "a.top"
  CHECK(decoded.find_leaf({"a", "top"})->offset == 1472);           // 1440 rounded up to 64
}

TEST_CASE("nodes are sorted by path with the root first, and key insertion order survives a round trip") {
  const Schema schema = Schema::plan({node({"m"}, {}, {"q", "b"}), node({}, {}, {"z", "m", "a"})},
                                     {leaf({"z"}, DType::Int8, {}), leaf({"a"}, DType::Int8, {}),
                                      leaf({"m", "q"}, DType::Int8, {}), leaf({"m", "b"}, DType::Int8, {})},
                                     DeviceType::CPU);
  REQUIRE(schema.nodes().size() == 2);
  CHECK(schema.nodes()[0].path.empty());
  const Schema decoded = round_trip(schema);
  CHECK(decoded.nodes()[0].keys == std::vector<std::string>{"z", "m", "a"});
  CHECK(decoded.nodes()[1].keys == std::vector<std::string>{"q", "b"});
}

TEST_CASE("find_leaf and find_node locate every entry by path and return null for anything else") {
  std::vector<std::string> keys;
  std::vector<LeafPlan> leaves;
  for (int i = 0; i < 300; ++i) {
    keys.push_back(std::string("k").append(std::to_string(i)));  // not "k" + ...: GCC 12 -Wrestrict false positive
    leaves.push_back(leaf({keys.back()}, kAllDTypes[static_cast<std::size_t>(i) % kAllDTypes.size()], {i % 5}));
  }
  const Schema schema = Schema::plan({node({}, {}, keys)}, leaves, DeviceType::CPU);
  for (const LeafPlan& plan : leaves) {
    const LeafSpec* found = schema.find_leaf(plan.path);
    REQUIRE(found != nullptr);
    CHECK(schema.path_of(*found) == plan.path);
    CHECK(found->dtype == plan.dtype);
    CHECK(found->shape == plan.shape);
  }
  CHECK(schema.find_leaf({"k300"}) == nullptr);
  CHECK(schema.find_leaf({}) == nullptr);
  CHECK(schema.find_node({}) == &schema.nodes()[0]);
  CHECK(schema.find_node({"k1"}) == nullptr);  // a leaf, not a node

  const Schema nested = rollout();
  CHECK(nested.find_node({"next"})->keys == std::vector<std::string>{"reward", "done", "obs"});
  CHECK(nested.find_leaf({"next"}) == nullptr);
  CHECK(nested.find_leaf({"next", "done"})->dtype == DType::Bool);
}

TEST_CASE("each leaf's path is the Path it was planned with: nested keys, keys with dots, empty keys") {
  // Joined with dots, "next.obs" the key and {"next", "obs"} the path would read alike.
  const std::vector<NodeSpec> nodes = {node({}, {2}, {"next.obs", "", "next", "a"}), node({"next"}, {2}, {"obs", ""}),
                                       node({""}, {2}, {"x"})};
  const std::vector<LeafPlan> leaves = {leaf({"next.obs"}, DType::Float32, {2}), leaf({"next", "obs"}, DType::Float32, {2, 3}),
                                        leaf({"next", ""}, DType::Int64, {2}), leaf({"", "x"}, DType::UInt8, {2}),
                                        leaf({"a"}, DType::Bool, {2, 1})};
  const Schema schema = Schema::plan(nodes, leaves, DeviceType::CPU);
  const Schema decoded = round_trip(schema);
  for (const Schema* s : {&schema, &decoded}) {
    for (const LeafPlan& plan : leaves) {
      INFO(path_str(plan.path));
      const LeafSpec* found = s->find_leaf(plan.path);
      REQUIRE(found != nullptr);
      CHECK(s->path_of(*found) == plan.path);
      CHECK(s->path_of(*found).to_path() == plan.path);
      CHECK(found->dtype == plan.dtype);
      CHECK(s->find_leaf(s->path_of(*found)) == found);
    }
    for (std::size_t i = 0; i < s->leaves().size(); ++i) CHECK(s->path_of(s->leaves()[i]) == s->leaf_path(i));
  }
  CHECK(schema.find_leaf({"next"}) == nullptr);
  CHECK(schema.find_leaf({"next", "obs", ""}) == nullptr);
  const PathView nested = schema.path_of(*schema.find_leaf({"next", ""}));
  CHECK(schema.find_node(nested.first(1)) == schema.find_node({"next"}));
  CHECK(schema.find_node(nested.first(0)) == &schema.nodes()[0]);
  check_same_leaves(decoded, schema);
  const Schema copy = decoded;  // a copy holds its own keys: its views point into it
  CHECK(copy == schema);
  CHECK(copy.leaf_path(0)[0].data() != decoded.leaf_path(0)[0].data());
}

TEST_CASE("the same tree built in two insertion orders has the same layout and fingerprint") {
  std::vector<NodeSpec> nodes = {node({"next"}, {4}, {"obs", "done", "reward"}), node({}, {4}, {"next", "action", "obs"})};
  std::vector<LeafPlan> leaves = rollout_leaves();
  std::reverse(leaves.begin(), leaves.end());
  const Schema reordered = Schema::plan(nodes, leaves, DeviceType::CPU);
  const Schema original = rollout();
  check_same_leaves(reordered, original);
  CHECK(reordered.buckets() == original.buckets());
  CHECK(reordered.total_bytes() == original.total_bytes());
  CHECK(reordered.fingerprint() == original.fingerprint());
  CHECK_FALSE(reordered == original);  // the key orders still differ, and == sees them
}

TEST_CASE("the fingerprint ignores the storage device, which still round-trips") {
  const Schema on_gpu = rollout(DeviceType::CUDA);
  CHECK(on_gpu.fingerprint() == rollout().fingerprint());
  CHECK_FALSE(on_gpu == rollout());
  CHECK(round_trip(on_gpu).storage_device() == DeviceType::CUDA);
}

TEST_CASE("the fingerprint changes with a leaf's shape or dtype, a batch size, or a key") {
  const std::uint64_t base = rollout().fingerprint();

  auto leaves = rollout_leaves();
  leaves[0].shape = {4, 2};
  CHECK(Schema::plan(rollout_nodes(), leaves, DeviceType::CPU).fingerprint() != base);

  leaves = rollout_leaves();
  leaves[0].dtype = DType::Float64;
  CHECK(Schema::plan(rollout_nodes(), leaves, DeviceType::CPU).fingerprint() != base);

  leaves = rollout_leaves();
  leaves[0].dtype = DType::Int32;  // same itemsize, same offsets if only the dtype were ignored
  CHECK(Schema::plan(rollout_nodes(), leaves, DeviceType::CPU).fingerprint() != base);

  auto nodes = rollout_nodes();
  nodes[0].batch_size = {};
  CHECK(Schema::plan(nodes, rollout_leaves(), DeviceType::CPU).fingerprint() != base);

  nodes = rollout_nodes();
  nodes[0].keys[0] = "observation";
  leaves = rollout_leaves();
  leaves[0].path = {"observation"};
  CHECK(Schema::plan(nodes, leaves, DeviceType::CPU).fingerprint() != base);
}

TEST_CASE("encode writes the documented little-endian header and the same bytes every time") {
  const Schema schema = rollout();
  const std::vector<std::byte> bytes = schema.encode();
  REQUIRE(bytes.size() > Schema::kHeaderBytes);
  CHECK(std::memcmp(bytes.data(), "TTSC", 4) == 0);
  CHECK(read_le(bytes, 4, 4) == Schema::kFormatVersion);
  CHECK(read_le(bytes, 8, 8) == bytes.size() - Schema::kHeaderBytes);
  CHECK(read_le(bytes, 16, 8) ==
        XXH3_64bits(bytes.data() + Schema::kHeaderBytes, bytes.size() - Schema::kHeaderBytes));
  CHECK(bytes == rollout().encode());
}

TEST_CASE("plan rejects inconsistent descriptions with InvalidArgument naming the path") {
  const DeviceType cpu = DeviceType::CPU;
  SECTION("no root node") {
    CHECK_THAT(message_of<InvalidArgument>([&] { Schema::plan({}, {}, cpu); }), Contains("no root node"));
  }
  SECTION("a leaf whose node does not exist") {
    CHECK_THAT(message_of<InvalidArgument>([&] {
                 Schema::plan({node({}, {}, {"ghost"})}, {leaf({"ghost", "x"}, DType::Int8, {})}, cpu);
               }),
               Contains("'ghost.x' has no parent node 'ghost'"));
  }
  SECTION("a node that does not list its leaf") {
    CHECK_THAT(message_of<InvalidArgument>([&] {
                 Schema::plan({node({}, {}, {"a"})}, {leaf({"a"}, DType::Int8, {}), leaf({"b"}, DType::Int8, {})}, cpu);
               }),
               Contains("does not list its child 'b'"));
  }
  SECTION("a key with no leaf or node behind it") {
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({"n"}, {}, {"a", "c"}), node({}, {}, {"n"})}, {leaf({"n", "a"}, DType::Int8, {})}, cpu); }),
               Contains("node 'n' lists key 'c' but has no such leaf or node"));
  }
  SECTION("a key listed twice") {
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({}, {}, {"a", "a"})}, {leaf({"a"}, DType::Int8, {})}, cpu); }),
               Contains("lists key 'a' twice"));
  }
  SECTION("a leaf and a node at the same path") {
    CHECK_THAT(message_of<InvalidArgument>([&] {
                 Schema::plan({node({}, {}, {"a"}), node({"a"}, {}, {})}, {leaf({"a"}, DType::Int8, {})}, cpu);
               }),
               Contains("two children named 'a'"));
  }
  SECTION("two leaves at the same path with different dtypes") {
    CHECK_THAT(message_of<InvalidArgument>([&] {
                 Schema::plan({node({}, {}, {"a"})}, {leaf({"a"}, DType::Int8, {}), leaf({"a"}, DType::Int16, {})}, cpu);
               }),
               Contains("two children named 'a'"));
  }
  SECTION("the same leaf twice") {
    CHECK_THAT(message_of<InvalidArgument>([&] {
                 Schema::plan({node({}, {}, {"a"})}, {leaf({"a"}, DType::Int8, {}), leaf({"a"}, DType::Int8, {})}, cpu);
               }),
               Contains("leaf 'a' appears twice"));
  }
  SECTION("the same node twice") {
    CHECK_THAT(message_of<InvalidArgument>([&] {
                 Schema::plan({node({}, {}, {"n"}), node({"n"}, {}, {}), node({"n"}, {}, {})}, {}, cpu);
               }),
               Contains("node 'n' is repeated"));
  }
  SECTION("a leaf whose shape does not start with its node's batch_size") {
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({}, {4}, {"obs"})}, {leaf({"obs"}, DType::Float32, {3, 4})}, cpu); }),
               Contains("leaf 'obs' has shape [3, 4], which does not start with its node's batch_size [4]"));
  }
  SECTION("a child node whose batch_size does not start with its parent's") {
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({}, {4}, {"n"}), node({"n"}, {3}, {})}, {}, cpu); }),
               Contains("node 'n' has batch_size [3], which does not start with its parent's [4]"));
  }
  SECTION("a negative dimension") {
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({}, {}, {"x"})}, {leaf({"x"}, DType::Int8, {2, -1})}, cpu); }),
               Contains("leaf 'x' has a negative dimension"));
  }
  SECTION("rank above 16") {
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({}, {}, {"x"})}, {leaf({"x"}, DType::Int8, Shape(17, 1))}, cpu); }),
               Contains("leaf 'x' shape has rank 17"));
  }
  SECTION("a shape whose byte count overflows") {
    CHECK_THAT(message_of<InvalidArgument>([&] {
                 Schema::plan({node({}, {}, {"x"})}, {leaf({"x"}, DType::Float64, {std::int64_t{1} << 31, std::int64_t{1} << 31})}, cpu);
               }),
               Contains("leaf 'x' of shape [2147483648, 2147483648] and dtype float64 holds more than 2^63 bytes"));
  }
  SECTION("an unknown dtype value") {
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({}, {}, {"x"})}, {leaf({"x"}, static_cast<DType>(99), {})}, cpu); }),
               Contains("leaf 'x' has unknown dtype value 99"));
  }
  SECTION("a leaf at the root path") {
    CHECK_THAT(message_of<InvalidArgument>([&] { Schema::plan({node({}, {}, {})}, {leaf({}, DType::Int8, {})}, cpu); }),
               Contains("empty path"));
  }
  SECTION("a key longer than the limit") {
    const std::string long_key(Schema::kMaxKeyBytes + 1, 'k');
    CHECK_THAT(message_of<InvalidArgument>(
                   [&] { Schema::plan({node({}, {}, {long_key})}, {leaf({long_key}, DType::Int8, {})}, cpu); }),
               Contains("key of 4097 bytes"));
  }
  SECTION("a path deeper than the limit") {
    std::vector<NodeSpec> nodes = {node({}, {}, {"k"})};
    Path path;
    for (std::size_t depth = 1; depth <= Schema::kMaxDepth; ++depth) {
      path.push_back("k");
      nodes.push_back(node(path, {}, {"k"}));
    }
    path.push_back("k");
    CHECK_THAT(message_of<InvalidArgument>([&] { Schema::plan(nodes, {leaf(path, DType::Int8, {})}, cpu); }),
               Contains("65 keys deep"));
  }
}

namespace {

// `count` leaves of mixed dtypes and ranks, ten to a node, keys of every length up to the limit.
struct WideTree {
  std::vector<NodeSpec> nodes;
  std::vector<LeafPlan> leaves;
};

WideTree wide_tree(int count) {
  constexpr DType kMix[] = {DType::Float32, DType::Int64, DType::UInt8, DType::BFloat16, DType::Complex128};
  WideTree tree;
  tree.nodes.push_back(node({}, {3}, {}));
  for (int i = 0; i < count; ++i) {
    std::string group = std::to_string(i / 10);
    group.insert(group.begin(), 'g');
    if (i % 10 == 0) {
      tree.nodes.push_back(node({group}, {3, 2}, {}));
      tree.nodes.front().keys.push_back(group);
    }
    // Key lengths cycle through 1..kMaxKeyBytes, so some fields straddle the encoder's internal buffers.
    std::string key = std::to_string(i);
    key.insert(key.begin(), 'k');
    key.resize(std::max(key.size(), static_cast<std::size_t>(i * 37) % Schema::kMaxKeyBytes), 'x');
    tree.nodes.back().keys.push_back(key);
    Shape shape = {3, 2};
    for (int d = 0; d < i % 4; ++d) shape.push_back(1 + (i + d) % 5);
    tree.leaves.push_back(leaf({group, key}, kMix[i % 5], shape));
  }
  return tree;
}

}  // namespace

TEST_CASE("a schema of thousands of leaves survives encode then decode field by field") {
  const WideTree tree = wide_tree(3000);
  const Schema schema = Schema::plan(tree.nodes, tree.leaves, DeviceType::CUDA);
  const std::vector<std::byte> bytes = schema.encode();
  const Schema decoded = Schema::decode(bytes);
  REQUIRE(decoded.leaves().size() == schema.leaves().size());
  for (std::size_t i = 0; i < schema.leaves().size(); ++i) {
    const LeafSpec& a = schema.leaves()[i];
    const LeafSpec& b = decoded.leaves()[i];
    INFO("leaf " << i);
    CHECK(decoded.leaf_path(i) == schema.leaf_path(i));
    CHECK(b.dtype == a.dtype);
    CHECK(b.shape == a.shape);
    CHECK(b.offset == a.offset);
    CHECK(b.nbytes == a.nbytes);
  }
  REQUIRE(decoded.nodes().size() == schema.nodes().size());
  for (std::size_t i = 0; i < schema.nodes().size(); ++i) {
    INFO("node " << i);
    CHECK(decoded.nodes()[i].path == schema.nodes()[i].path);
    CHECK(decoded.nodes()[i].batch_size == schema.nodes()[i].batch_size);
    CHECK(decoded.nodes()[i].keys == schema.nodes()[i].keys);
  }
  CHECK(decoded.buckets() == schema.buckets());
  CHECK(decoded.total_bytes() == schema.total_bytes());
  CHECK(decoded.storage_device() == DeviceType::CUDA);
  CHECK(decoded.fingerprint() == schema.fingerprint());
  CHECK(decoded.encode() == bytes);
}

TEST_CASE("plan lays out leaves listed in any order exactly as when they are listed in path order") {
  const WideTree tree = wide_tree(500);
  const Schema in_order = Schema::plan(tree.nodes, tree.leaves, DeviceType::CPU);
  std::vector<LeafPlan> shuffled = tree.leaves;
  std::mt19937 random(7);
  std::shuffle(shuffled.begin(), shuffled.end(), random);
  std::vector<NodeSpec> nodes = tree.nodes;
  std::reverse(nodes.begin(), nodes.end());
  const Schema reordered = Schema::plan(nodes, shuffled, DeviceType::CPU);
  check_same_leaves(reordered, in_order);
  CHECK(reordered.nodes() == in_order.nodes());
  CHECK(reordered.fingerprint() == in_order.fingerprint());
  for (std::size_t i = 1; i < in_order.leaves().size(); ++i) {
    const LeafSpec& before = in_order.leaves()[i - 1];
    const LeafSpec& after = in_order.leaves()[i];
    INFO("leaf " << i);
    CHECK((before.dtype < after.dtype ||
           (before.dtype == after.dtype && in_order.leaf_path(i - 1).to_path() < in_order.leaf_path(i).to_path())));
  }
}

TEST_CASE("the fingerprint is XXH3-64 of the canonical layout bytes, however many leaves there are") {
  // Written here independently of the library: version, leaves (path, dtype, shape, offset, nbytes),
  // nodes (path, batch_size), total bytes, each a little-endian u64 or a u64-counted list.
  std::string canonical;
  const auto number = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) canonical.push_back(static_cast<char>(v >> (8 * i)));
  };
  const auto path = [&](const auto& p) {
    number(p.size());
    for (const std::string_view key : p) {
      number(key.size());
      canonical += key;
    }
  };
  const auto shape = [&](const Shape& s) {
    number(s.size());
    for (const std::int64_t d : s) number(static_cast<std::uint64_t>(d));
  };
  for (const int count : {0, 5, 2000}) {
    const WideTree tree = wide_tree(count);
    const Schema schema = Schema::plan(tree.nodes, tree.leaves, DeviceType::CPU);
    canonical.clear();
    number(Schema::kFormatVersion);
    number(schema.leaves().size());
    for (std::size_t i = 0; i < schema.leaves().size(); ++i) {
      const LeafSpec& l = schema.leaves()[i];
      path(schema.leaf_path(i));
      number(static_cast<std::uint64_t>(l.dtype));
      shape(l.shape);
      number(l.offset);
      number(l.nbytes);
    }
    number(schema.nodes().size());
    for (const NodeSpec& n : schema.nodes()) {
      path(n.path);
      shape(n.batch_size);
    }
    number(schema.total_bytes());
    INFO(count << " leaves, " << canonical.size() << " canonical bytes");
    CHECK(schema.fingerprint() == XXH3_64bits(canonical.data(), canonical.size()));
  }
}
