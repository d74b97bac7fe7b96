// The trees bench_channel and bench_channel_mpi move, made alike on both ends of a transfer so that
// the receiver knows every value the sender sent.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/tensortree.hpp"

namespace tensortree::bench {

inline void check(bool ok, const std::string& what) {
  if (!ok) throw CorruptData("bench_channel: " + what);
}

// About `bytes` bytes in four leaves of three dtypes, two of them nested (one leaf below 1 KiB);
// values non-zero.
inline TensorTree make_channel_tree(std::int64_t bytes) {
  const std::int64_t rows = bytes >= (1 << 20) ? 1024 : 1;
  const std::int64_t per_leaf = std::max<std::int64_t>(1, bytes / 4 / rows);
  if (bytes < 1024) {
    return TensorTree::from_map({rows}, {{"obs", Tensor::arange({rows, bytes / 4 / rows}, 1.0, 0.5)}});
  }
  return TensorTree::from_map(
      {rows}, {{"obs.pixels", Tensor::arange({rows, per_leaf}, 3.0, 1.0, {.dtype = DType::UInt8})},
               {"obs.state", Tensor::arange({rows, per_leaf / 4}, 1.0, 0.25)},
               {"next.value", Tensor::arange({rows, per_leaf / 8}, 2.0, 0.5, {.dtype = DType::Float64})},
               {"action", Tensor::arange({rows, per_leaf / 8}, 7.0, 3.0, {.dtype = DType::Int64})}});
}

// A consolidated tree of that layout, every value zero: what a receiver receives into, so that a
// receive that wrote nothing cannot pass the check.
inline TensorTree zeroed_channel_tree(std::int64_t bytes) {
  TensorTree tree = make_channel_tree(bytes).consolidate();
  tree.zero_();
  return tree;
}

inline std::size_t payload_bytes(const TensorTree& tree) {
  std::size_t total = 0;
  for (const auto& [path, leaf] : tree.leaves()) total += leaf.nbytes();
  return total;
}

// The bytes raw UCX moves in place of a tree of `bytes`: as many as the tree's leaves hold.
inline std::vector<std::byte> raw_pattern(std::size_t bytes) {
  std::vector<std::byte> pattern(bytes);
  for (std::size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<std::byte>(i * 7 + 1);
  return pattern;
}

}  // namespace tensortree::bench
