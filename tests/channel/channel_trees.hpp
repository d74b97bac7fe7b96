// The trees the channel tests move: nested, four dtypes, every element a function of the actor,
// the tree's sequence number and the element's index, so that a receiver checks every element
// without being told what was sent (the "meta" leaf names actor, sequence and row).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "tensortree/tree.hpp"

namespace tensortree::test {

// The rows of the small trees most tests send.
inline constexpr std::int64_t kRows = 24;

inline double channel_value(std::int64_t actor, std::int64_t sequence, std::int64_t index, int leaf) {
  return static_cast<double>(actor * 1000003 + sequence * 7919 + index * 31 + leaf + 1);
}

inline TensorTree channel_tree(std::int64_t actor, std::int64_t sequence, std::int64_t rows) {
  Tensor meta = Tensor::empty({rows, 3}, {.dtype = DType::Int64});
  Tensor obs = Tensor::empty({rows, 4}, {.dtype = DType::Float32});
  Tensor reward = Tensor::empty({rows}, {.dtype = DType::Float64});
  Tensor action = Tensor::empty({rows, 3}, {.dtype = DType::Int32});
  Tensor done = Tensor::empty({rows}, {.dtype = DType::UInt8});
  for (std::int64_t r = 0; r < rows; ++r) {
    meta.data<std::int64_t>()[3 * r] = actor;
    meta.data<std::int64_t>()[3 * r + 1] = sequence;
    meta.data<std::int64_t>()[3 * r + 2] = r;
    reward.data<double>()[r] = channel_value(actor, sequence, r, 1) / 8;
    done.data<std::uint8_t>()[r] = static_cast<std::uint8_t>(static_cast<std::int64_t>(channel_value(actor, sequence, r, 2)) % 251 + 1);
  }
  for (std::int64_t i = 0; i < rows * 4; ++i) obs.data<float>()[i] = static_cast<float>(channel_value(actor, sequence, i, 3) / 4);
  for (std::int64_t i = 0; i < rows * 3; ++i) {
    action.data<std::int32_t>()[i] = static_cast<std::int32_t>(static_cast<std::int64_t>(channel_value(actor, sequence, i, 4)) % 2000000011);
  }
  return TensorTree::from_map({rows}, {{"meta", meta}, {"obs", obs}, {"next.reward", reward}, {"next.done", done},
                                       {"next.policy.action", action}});
}

struct TreeIdentity {
  std::int64_t actor;
  std::int64_t sequence;
};

// Checks every element of a tree channel_tree made; the first difference as text, or "" when whole.
inline std::string check_channel_tree(const TensorTree& tree, std::int64_t rows, TreeIdentity* identity = nullptr) {
  const Tensor& meta = tree.get("meta");
  if (meta.shape() != Shape{rows, 3}) return fmt::format("meta has {} rows, expected {}", meta.shape()[0], rows);
  const std::int64_t actor = meta.data<std::int64_t>()[0];
  const std::int64_t sequence = meta.data<std::int64_t>()[1];
  if (identity) *identity = {actor, sequence};
  const auto differs = [&](const char* leaf, std::int64_t i) {
    return fmt::format("actor {} tree {}: {}[{}] differs", actor, sequence, leaf, i);
  };
  const TensorTree expected = channel_tree(actor, sequence, rows);
  const auto same = [&](const char* path, auto type_tag) -> std::string {
    using T = decltype(type_tag);
    const Tensor& got = tree.get(path);
    const Tensor& want = expected.get(path);
    if (got.dtype() != want.dtype() || got.shape() != want.shape()) return fmt::format("{}: dtype or shape differs", path);
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      if (got.data<T>()[i] != want.data<T>()[i]) return differs(path, i);
    }
    return "";
  };
  for (const std::string& problem : {same("meta", std::int64_t{}), same("obs", float{}), same("next.reward", double{}),
                                     same("next.done", std::uint8_t{}), same("next.policy.action", std::int32_t{})}) {
    if (!problem.empty()) return problem;
  }
  return "";
}

// Checks row `i` of a batch of rows from trees channel_tree made (a replay sample: rows of many
// trees); the first difference as text, or "" when whole.
inline std::string check_channel_row(const TensorTree& batch, std::int64_t i) {
  const std::int64_t* meta = batch.get("meta").select(0, i).data<std::int64_t>();
  const std::int64_t actor = meta[0], sequence = meta[1], row = meta[2];
  const TensorTree expected = channel_tree(actor, sequence, row + 1);
  for (const char* path : {"meta", "obs", "next.reward", "next.done", "next.policy.action"}) {
    const Tensor got = batch.get(path).select(0, i);
    const Tensor want = expected.get(path).select(0, row);
    if (got.nbytes() != want.nbytes() || std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()) != 0) {
      return fmt::format("row {} (actor {} tree {} row {}): {} differs", i, actor, sequence, row, path);
    }
  }
  return "";
}

}  // namespace tensortree::test
