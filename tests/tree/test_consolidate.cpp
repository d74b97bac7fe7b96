#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/work.hpp"

using namespace tensortree;

namespace {

// Every dtype, zero-size leaves, batch-only leaves, non-contiguous leaves, an empty sub-tree, a
// nested batch size and 4-deep nesting; `reversed` inserts the same entries in the opposite order.
TensorTree make_tree(bool reversed = false, double start = 1.0) {
  std::vector<std::pair<Path, Tensor>> leaves;
  double next = start;
  for (DType dtype : kAllDTypes) {
    leaves.push_back({{"dtypes", std::string(dtype_name(dtype))}, Tensor::arange({4, 3}, next, 1, {dtype})});
    next += 12;
  }
  leaves.push_back({{"empty_rows"}, Tensor::empty({4, 0}, {DType::Float32})});
  leaves.push_back({{"batch_only"}, Tensor::arange({4}, next, 1, {DType::Int32})});
  leaves.push_back({{"transposed"}, Tensor::arange({6, 4}, next + 10, 1, {DType::Float64}).transpose(0, 1)});
  leaves.push_back({{"stepped"}, Tensor::arange({4, 10}, next + 50, 1, {DType::Int16}).slice(1, {1, 10, 3})});
  leaves.push_back({{"a", "b", "c", "d"}, Tensor::arange({4, 2, 2}, next + 100, 0.5, {DType::Float32})});
  if (reversed) std::reverse(leaves.begin(), leaves.end());

  TensorTree tree(Shape{4});
  for (auto& [path, leaf] : leaves) tree.set(path, leaf);
  TensorTree nested(Shape{4, 2});
  nested.set("pairs", Tensor::arange({4, 2, 3}, next + 200, 1, {DType::UInt8}));
  tree.set("nested", nested);
  tree.set("empty_node", TensorTree(Shape{4}));
  return tree;
}

std::vector<std::byte> bytes_of(const TensorTree& consolidated) {
  const auto* data = consolidated.storage()->data();
  return {data, data + consolidated.schema()->total_bytes()};
}

}  // namespace

TEST_CASE("consolidate then from_consolidated round-trips every kind of leaf, keeping key order") {
  const TensorTree tree = make_tree();
  const TensorTree packed = tree.consolidate();
  REQUIRE(packed.is_consolidated());
  CHECK_FALSE(tree.is_consolidated());
  CHECK(packed.equal(tree));
  CHECK(packed.keys({.include_nested = true}) == tree.keys({.include_nested = true}));
  packed.for_each_leaf([](const Path&, const Tensor& leaf) { CHECK(leaf.is_contiguous()); });

  const TensorTree rebuilt = TensorTree::from_consolidated(packed.storage(), packed.schema());
  CHECK(rebuilt.equal(tree));
  CHECK(rebuilt.keys({.include_nested = true}) == tree.keys({.include_nested = true}));
  CHECK(rebuilt.storage() == packed.storage());

  const auto decoded = std::make_shared<const Schema>(Schema::decode(packed.schema()->encode()));
  CHECK(TensorTree::from_consolidated(packed.storage(), decoded).equal(tree));
}

TEST_CASE("consolidated leaves are views into one buffer at their schema offsets, padding zeroed") {
  const TensorTree tree = make_tree();
  const TensorTree probe = tree.consolidate();
  const std::uint64_t total = probe.schema()->total_bytes();
  // A dirty buffer proves that packing writes the padding rather than trusting it.
  const StoragePtr dirty = Storage::allocate(total, Device::cpu());
  std::memset(dirty->data(), 0xab, total);
  const TensorTree packed = tree.consolidate({.reuse = dirty});
  REQUIRE(packed.storage() == dirty);

  std::vector<bool> covered(total, false);
  for (const LeafSpec& spec : packed.schema()->leaves()) {
    CHECK(spec.offset % Schema::kAlignment == 0);
    const Tensor& leaf = packed.get(packed.schema()->path_of(spec));
    CHECK(static_cast<std::byte*>(leaf.data_ptr()) == dirty->data() + spec.offset);
    std::fill(covered.begin() + static_cast<std::ptrdiff_t>(spec.offset),
              covered.begin() + static_cast<std::ptrdiff_t>(spec.offset + spec.nbytes), true);
  }
  for (std::uint64_t i = 0; i < total; ++i) {
    if (!covered[i]) REQUIRE(dirty->data()[i] == std::byte{0});
  }
  CHECK(packed.equal(tree));
}

TEST_CASE("trees built in different insertion orders share layout, fingerprint and bytes") {
  const TensorTree forward = make_tree(false).consolidate();
  const TensorTree backward = make_tree(true).consolidate();
  CHECK(forward.keys({.include_nested = true}) != backward.keys({.include_nested = true}));
  CHECK(forward.schema()->fingerprint() == backward.schema()->fingerprint());
  CHECK(forward.schema()->leaves() == backward.schema()->leaves());
  for (std::size_t i = 0; i < forward.schema()->leaves().size(); ++i) {
    CHECK(forward.schema()->leaf_path(i) == backward.schema()->leaf_path(i));
  }
  CHECK(bytes_of(forward) == bytes_of(backward));
}

TEST_CASE("a changed shape or dtype changes the fingerprint") {
  const std::uint64_t base = make_tree().consolidate().schema()->fingerprint();
  TensorTree reshaped = make_tree();
  reshaped.set("batch_only", Tensor::arange({4, 1}, 1, 1, {DType::Int32}));
  TensorTree retyped = make_tree();
  retyped.set("batch_only", Tensor::arange({4}, 1, 1, {DType::Int64}));
  CHECK(reshaped.consolidate().schema()->fingerprint() != base);
  CHECK(retyped.consolidate().schema()->fingerprint() != base);
}

TEST_CASE("in-place writes keep consolidation; structural changes anywhere drop it") {
  TensorTree packed = make_tree().consolidate();
  const StoragePtr buffer = packed.storage();

  packed.set_("batch_only", Tensor::full({4}, 9, {DType::Int32}));
  packed.get({"a", "b", "c", "d"}).fill_(2.5);
  packed.apply_([](const Tensor& leaf) { return leaf; });
  REQUIRE(packed.is_consolidated());
  const LeafSpec* spec = packed.schema()->find_leaf({"batch_only"});
  REQUIRE(spec != nullptr);
  const auto* in_buffer = reinterpret_cast<const std::int32_t*>(buffer->data() + spec->offset);
  for (int i = 0; i < 4; ++i) CHECK(in_buffer[i] == 9);

  SECTION("replacing a leaf") { packed.set("batch_only", Tensor::full({4}, 1, {DType::Int32})); }
  SECTION("adding a key") { packed.set("extra", Tensor::full({4}, 1)); }
  SECTION("erasing a key") { packed.erase("stepped"); }
  SECTION("through a sub-tree reference") { packed.subtree("a.b").set("new", Tensor::full({4}, 1)); }
  SECTION("changing the batch size") { packed.set_batch_size({}); }
  CHECK_FALSE(packed.is_consolidated());
  CHECK(packed.storage() == nullptr);
  CHECK(packed.schema() == nullptr);
}

TEST_CASE("packing splits the bytes across any number of threads with identical results") {
  TensorTree tree(Shape{8});
  for (int i = 0; i < 12; ++i) {
    const DType dtype = i % 2 ? DType::Float32 : DType::Int64;
    Tensor big = Tensor::arange({8, 9000 + i}, i * 100000.0 + 1, 1, {dtype});
    tree.set("big_" + std::to_string(i), i % 3 == 0 ? big.slice(1, {0, 9000 + i, 2}) : big);
  }
  const auto reference = bytes_of(tree.consolidate({.threads = 1}));
  for (int threads : {2, 3, 7}) {
    const TensorTree packed = tree.consolidate({.threads = threads});
    CHECK(bytes_of(packed) == reference);
    CHECK(packed.equal(tree));
  }
}

TEST_CASE("a reused buffer is used only when it is large enough") {
  const TensorTree tree = make_tree();
  const TensorTree first = tree.consolidate();
  CHECK(tree.consolidate({.reuse = first.storage()}).storage() == first.storage());
  const StoragePtr small = Storage::allocate(64, Device::cpu());
  const TensorTree packed = tree.consolidate({.reuse = small});
  CHECK(packed.storage() != small);
  CHECK(packed.equal(tree));
}

TEST_CASE("from_consolidated rejects a buffer smaller than the schema") {
  const TensorTree packed = make_tree().consolidate();
  const StoragePtr small = Storage::allocate(packed.schema()->total_bytes() - 64, Device::cpu());
  REQUIRE_THROWS_AS(TensorTree::from_consolidated(small, packed.schema()), InvalidArgument);
  REQUIRE_THROWS_WITH(TensorTree::from_consolidated(small, packed.schema()), Catch::Contains("bytes"));
}

TEST_CASE("unpack_from writes a consolidated buffer into a tree's own strided leaves") {
  const TensorTree target = make_tree(false, 1.0);
  const TensorTree source = make_tree(true, 2.0).consolidate();  // stays inside float8 range
  REQUIRE_FALSE(target.equal(source));
  target.unpack_from(*source.storage(), *source.schema());
  CHECK(target.equal(source));
  CHECK_FALSE(target.get("transposed").is_contiguous());
}

TEST_CASE("unpack_from rejects a buffer of another layout and leaves the tree untouched") {
  TensorTree target = make_tree();
  const TensorTree before = target.clone();
  TensorTree other = make_tree(false, 3.0);
  other.set("batch_only", Tensor::arange({4, 2}, 1, 1, {DType::Int32}));
  const TensorTree packed = other.consolidate();
  REQUIRE_THROWS_AS(target.unpack_from(*packed.storage(), *packed.schema()), SchemaMismatch);
  REQUIRE_THROWS_WITH(target.unpack_from(*packed.storage(), *packed.schema()),
                      Catch::Contains(std::to_string(packed.schema()->fingerprint())));
  // The first key that differs, named with both sides, where a fingerprint says nothing to a user.
  REQUIRE_THROWS_WITH(target.unpack_from(*packed.storage(), *packed.schema()),
                      Catch::Contains("at key 'batch_only': int32 [4, 2] in the buffer, int32 [4] here"));
  CHECK(target.equal(before));
}

TEST_CASE("an empty tree consolidates to an empty buffer") {
  const TensorTree packed = TensorTree(Shape{3}).consolidate();
  CHECK(packed.is_consolidated());
  CHECK(packed.schema()->total_bytes() == 0);
  CHECK(TensorTree::from_consolidated(packed.storage(), packed.schema()).batch_size() == Shape{3});
}

TEST_CASE("consolidating onto a GPU or into pinned memory needs CUDA") {
  if (cuda_device_count() > 0) return;  // the GPU suite covers these paths
  const TensorTree tree = make_tree();
  CHECK_THROWS_AS(tree.consolidate({.device = Device::cuda(0)}), NotSupported);
  CHECK_THROWS_AS(tree.consolidate({.pinned = true}), NotSupported);
}

TEST_CASE("consolidate_async of a host tree packs before it returns, with its work complete") {
  TensorTree tree(Shape{3});
  tree.set("obs", Tensor::arange({3, 4}, 5, 1, {DType::Float32}));
  tree.set("next.reward", Tensor::arange({5, 3}, 50, 1, {DType::Int64}).transpose(0, 1));
  auto [packed, work] = tree.consolidate_async();
  REQUIRE(work->is_completed());
  REQUIRE(packed.is_consolidated());
  REQUIRE(packed.equal(tree));
  REQUIRE(packed.storage() != tree.get("obs").storage());
}

TEST_CASE("trees built from one schema share their wide nodes' key index, which a change to one leaves alone") {
  TensorTree wide(Shape{2});
  for (int i = 0; i < 40; ++i) wide.set("w.key_" + std::to_string(i), Tensor::arange({2}, 10.0 * i, 1, {DType::Int32}));
  const TensorTree packed = wide.consolidate();
  TensorTree first = TensorTree::from_consolidated(packed.storage(), packed.schema());
  TensorTree second = TensorTree::from_consolidated(packed.storage(), packed.schema());

  first.set("w.added", Tensor::arange({2}, 900, 1, {DType::Int32}));
  second.erase("w.key_7");
  second.rename_key_("w.key_8", "w.renamed");

  const TensorTree third = TensorTree::from_consolidated(packed.storage(), packed.schema());
  for (int i = 0; i < 40; ++i) {
    const std::string key = "w.key_" + std::to_string(i);
    INFO(key);
    REQUIRE(first.get(key).value_at_linear(1) == 10.0 * i + 1);
    REQUIRE(third.get(key).value_at_linear(1) == 10.0 * i + 1);
    REQUIRE(second.contains(key) == (i != 7 && i != 8));
    if (i != 7 && i != 8) REQUIRE(second.get(key).value_at_linear(0) == 10.0 * i);
  }
  REQUIRE(first.get("w.added").value_at_linear(0) == 900.0);
  REQUIRE_FALSE(third.contains("w.added"));
  REQUIRE_FALSE(second.contains("w.added"));
  REQUIRE(second.get("w.renamed").value_at_linear(0) == 80.0);
  REQUIRE_FALSE(first.contains("w.renamed"));
  REQUIRE(first.subtree("w").keys().size() == 41);
  REQUIRE(second.subtree("w").keys().size() == 39);
}
