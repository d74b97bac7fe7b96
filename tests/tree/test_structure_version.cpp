// A tree's structure version and the packing plans kept on it: every structural change, anywhere in
// the tree and through any path to it, gives the changed node and each node above it a new version,
// so a plan made before the change is never used after it (a stale plan would pack old leaves, or
// the old layout). In-place writes keep the version; the reused plan must still read new values.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "core/storage_access.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tree_mutations.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// consolidate() of `tree` holds every leaf of `tree`, element by element, and nothing else.
void require_packs_current_leaves(const TensorTree& tree) {
  const TensorTree packed = tree.consolidate();
  REQUIRE(packed.schema()->leaves().size() == tree.keys({.include_nested = true, .leaves_only = true}).size());
  tree.for_each_leaf([&](const Path& path, const Tensor& want) {
    INFO("leaf " << path_str(path));
    const Tensor& got = packed.get(path);
    REQUIRE(got.shape() == want.shape());
    REQUIRE(got.dtype() == want.dtype());
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      INFO("element " << i);
      REQUIRE(got.value_at_linear(i) == want.value_at_linear(i));
    }
  });
}

// The sub-trees whose plans the tests make before a change, and check after it.
const std::vector<Path> kPackedNodes = {{}, {"next"}, {"info"}};

bool holds_node(const TensorTree& tree, const Path& path) {
  return path.empty() || (tree.contains(path) && !tree.is_leaf(path));
}

}  // namespace

TEST_CASE("after every kind of change, consolidate() of the tree and of its sub-trees packs their current leaves") {
  for (const TreeMutation& mutation : tree_mutations()) {
    INFO("change: " << mutation.name);
    TensorTree tree = mutation_base_tree(1);
    std::vector<std::uint64_t> before;
    for (const Path& node : kPackedNodes) {
      require_packs_current_leaves(tree.subtree(node));  // makes the plan a stale one would be
      before.push_back(tree.subtree(node).structure_version());
    }

    mutation.apply(tree);

    if (mutation.structural) {
      REQUIRE(tree.structure_version() != before[0]);
    } else {
      for (std::size_t i = 0; i < kPackedNodes.size(); ++i) REQUIRE(tree.subtree(kPackedNodes[i]).structure_version() == before[i]);
    }
    for (const Path& node : kPackedNodes) {
      INFO("node '" << path_str(node) << "'");
      if (holds_node(tree, node)) require_packs_current_leaves(tree.subtree(node));
    }
  }
}

TEST_CASE("a change deep in the tree gives every node above it a new version, and leaves its siblings' alone") {
  TensorTree tree = mutation_base_tree(1);
  const std::uint64_t root = tree.structure_version();
  const std::uint64_t info = tree.subtree("info").structure_version();
  const std::uint64_t episode = tree.subtree("info.episode").structure_version();
  const std::uint64_t next = tree.subtree("next").structure_version();

  tree.subtree("info.episode").set("length", Tensor::arange({4}, 5, 1, {DType::Int32}));

  CHECK(tree.subtree("info.episode").structure_version() != episode);
  CHECK(tree.subtree("info").structure_version() != info);
  CHECK(tree.structure_version() != root);
  CHECK(tree.subtree("next").structure_version() == next);
}

TEST_CASE("a copy has a version of its own: changing it leaves the original's version and plan alone") {
  TensorTree original = mutation_base_tree(1);
  require_packs_current_leaves(original);
  const std::uint64_t version = original.structure_version();
  TensorTree copy = original;
  REQUIRE(copy.structure_version() != version);

  copy.set("obs", Tensor::arange({4, 3}, 300, 1, {DType::Float32}));

  REQUIRE(original.structure_version() == version);
  require_packs_current_leaves(original);
  require_packs_current_leaves(copy);
  REQUIRE(copy.consolidate().get("obs").value_at_linear(0) == 300.0);
  REQUIRE(original.consolidate().get("obs").value_at_linear(0) == 1.0);
}

TEST_CASE("a plan made before a receive swapped the tree's buffer reads the bytes that arrived") {
  // A receive into a consolidated tree trades the memory of its Storage for the arrived buffer's:
  // the Storage (and the structure) stay, the address changes.
  TensorTree tree = mutation_base_tree(1).consolidate();
  const TensorTree& next = tree.subtree("next");  // not a root: packing it walks its leaves
  require_packs_current_leaves(next);
  const std::uint64_t version = next.structure_version();
  const TensorTree arrived = mutation_base_tree(2000).consolidate();
  REQUIRE(*arrived.schema() == *tree.schema());

  detail::StorageAccess::swap_memory(*tree.storage(), *arrived.storage());

  REQUIRE(next.structure_version() == version);
  REQUIRE(next.get("reward").value_at_linear(0) == 2060.0);
  require_packs_current_leaves(next);
  REQUIRE(next.consolidate().get("reward").value_at_linear(0) == 2060.0);
}

TEST_CASE("memmap_ rebinds the leaves to the files: a new version, and packs read the mapped leaves") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tt_structure_version_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TensorTree tree = mutation_base_tree(1);
  require_packs_current_leaves(tree);
  const std::uint64_t version = tree.structure_version();

  tree.memmap_(dir);
  REQUIRE(tree.structure_version() != version);
  tree.get("obs").fill_(77);  // writes the mapped file, not the leaves the old plan named

  require_packs_current_leaves(tree);
  REQUIRE(tree.consolidate().get("obs").value_at_linear(11) == 77.0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("unpack_from after a change writes the tree's current leaves") {
  for (const TreeMutation& mutation : tree_mutations()) {
    INFO("change: " << mutation.name);
    TensorTree tree = mutation_base_tree(1);
    const TensorTree layout_before = tree.consolidate();
    tree.unpack_from(*layout_before.storage(), *layout_before.schema());  // a receive-side plan to go stale
    mutation.apply(tree);

    // A buffer of the changed layout, every value distinct from the tree's.
    TensorTree source = TensorTree(tree).apply([](const Tensor& leaf) { return leaf.add(Scalar(5000)); });
    const TensorTree message = source.consolidate();
    tree.unpack_from(*message.storage(), *message.schema());

    source.for_each_leaf([&](const Path& path, const Tensor& want) {
      INFO("leaf " << path_str(path));
      const Tensor& got = tree.get(path);
      for (std::int64_t i = 0; i < want.numel(); ++i) REQUIRE(got.value_at_linear(i) == want.value_at_linear(i));
    });
  }
}
