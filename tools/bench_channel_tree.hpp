// The trees bench_channel and bench_channel_mpi move, made alike on both ends of a transfer so that
// the receiver knows every value the sender sent.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tensortree/error.hpp"
#include "tensortree/tensortree.hpp"

namespace tensortree::bench {

inline void check(bool ok, const std::string& what) {
  if (!ok) throw CorruptData("bench_channel: " + what);
}

// A tree's shape: `leaves` leaves of `leaf_bytes` bytes each; on command lines "LEAVESxBYTES".
struct TreeShape {
  std::int64_t leaves = 1;
  std::int64_t leaf_bytes = 256;

  std::string text() const { return std::to_string(leaves) + "x" + std::to_string(leaf_bytes); }
  static TreeShape parse(const std::string& text) {
    TreeShape shape;
    char x = 0;
    check(std::sscanf(text.c_str(), "%ld%c%ld", &shape.leaves, &x, &shape.leaf_bytes) == 3 && x == 'x' &&
              shape.leaves > 0 && shape.leaf_bytes >= 8,
          "a tree shape is LEAVESxBYTES (BYTES >= 8), not '" + text + "'");
    return shape;
  }
};

// A tree of that shape: leaves of four dtypes in turn, in groups of 32 below the root, every leaf
// one batch of `rows` rows (1024 where a leaf has a MiB or more, else 1); values non-zero.
inline TensorTree make_channel_tree(TreeShape shape) {
  static constexpr DType kTypes[] = {DType::UInt8, DType::Float32, DType::Float64, DType::Int64};
  const std::int64_t rows = shape.leaf_bytes >= (1 << 20) ? 1024 : 1;
  std::map<std::string, Tensor> leaves;
  for (std::int64_t i = 0; i < shape.leaves; ++i) {
    const DType dtype = kTypes[i % 4];
    const std::int64_t columns = std::max<std::int64_t>(1, shape.leaf_bytes / rows / static_cast<std::int64_t>(itemsize(dtype)));
    const std::string path = shape.leaves == 1 ? "obs" : fmt::format("group{}.leaf{}", i / 32, i % 32);
    leaves.emplace(path, Tensor::arange({rows, columns}, 1.0 + i, 0.5, {.dtype = dtype}));
  }
  return TensorTree::from_map({rows}, leaves);
}

// A consolidated tree of that layout, every value zero: what a receiver receives into, so that a
// receive that wrote nothing cannot pass the check.
inline TensorTree zeroed_channel_tree(TreeShape shape) {
  TensorTree tree = make_channel_tree(shape).consolidate();
  tree.zero_();
  return tree;
}

inline std::size_t payload_bytes(const TensorTree& tree) {
  std::size_t total = 0;
  for (const auto& [path, leaf] : tree.leaves()) total += leaf.nbytes();
  return total;
}

// The bytes raw UCX moves in place of a tree: as many as its leaves hold (`bytes`).
inline std::vector<std::byte> raw_pattern(std::size_t bytes) {
  std::vector<std::byte> pattern(bytes);
  for (std::size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<std::byte>(i * 7 + 1);
  return pattern;
}

}  // namespace tensortree::bench
