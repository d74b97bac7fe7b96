// Shared by the replay tests: scratch directories and rows whose every element follows from the
// row's step number, so that a torn, stale or misplaced row fails the check.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../../memmap/memmap_test_support.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/tensortree.hpp"

namespace replay_test {

namespace fs = std::filesystem;
using namespace tensortree;
using memmap_test::ScratchDir;

constexpr std::int64_t kObsElements = 12;  // obs rows are {3, 4}

inline float obs_value(std::int64_t step, std::int64_t e) { return static_cast<float>(step * 13 + e + 1); }
inline double reward_value(std::int64_t step) { return 0.5 * static_cast<double>(step) + 1.0; }
inline std::uint8_t done_value(std::int64_t step, std::int64_t e) { return static_cast<std::uint8_t>((step + e) % 251 + 1); }

// k rows with steps first..first+k-1, all of trajectory `trajectory`.
inline TensorTree make_rows(std::int64_t first, std::int64_t k, std::int64_t trajectory = 0) {
  Tensor obs = Tensor::empty({k, 3, 4}, {DType::Float32});
  Tensor step = Tensor::empty({k}, {DType::Int64});
  Tensor traj = Tensor::empty({k}, {DType::Int64});
  Tensor reward = Tensor::empty({k}, {DType::Float64});
  Tensor done = Tensor::empty({k, 2}, {DType::UInt8});
  for (std::int64_t i = 0; i < k; ++i) {
    const std::int64_t s = first + i;
    for (std::int64_t e = 0; e < kObsElements; ++e) obs.data<float>()[i * kObsElements + e] = obs_value(s, e);
    step.data<std::int64_t>()[i] = s;
    traj.data<std::int64_t>()[i] = trajectory;
    reward.data<double>()[i] = reward_value(s);
    for (std::int64_t e = 0; e < 2; ++e) done.data<std::uint8_t>()[i * 2 + e] = done_value(s, e);
  }
  TensorTree tree(Shape{k});
  tree.set("obs", obs);
  tree.set("step", step);
  tree.set("trajectory", traj);
  tree.set("next.reward", reward);
  tree.set("next.done", done);
  return tree;
}

// Checks every element of row i of `batch` against its step; returns the step. Plain bool checks
// (counted by the caller) keep tests that check thousands of rows fast.
inline bool row_consistent(const TensorTree& batch, std::int64_t i, std::int64_t& step) {
  step = batch.get("step").at<std::int64_t>({i});
  bool ok = batch.get("next.reward").at<double>({i}) == reward_value(step);
  for (std::int64_t e = 0; e < kObsElements; ++e) ok = ok && batch.get("obs").at<float>({i, e / 4, e % 4}) == obs_value(step, e);
  for (std::int64_t e = 0; e < 2; ++e) ok = ok && batch.get("next.done").at<std::uint8_t>({i, e}) == done_value(step, e);
  return ok;
}

inline std::int64_t checked_step(const TensorTree& batch, std::int64_t i) {
  std::int64_t step = -1;
  INFO("row " << i);
  REQUIRE(row_consistent(batch, i, step));
  return step;
}

// The step of every row of `batch`, each row checked whole (one assertion for all of them).
inline std::vector<std::int64_t> checked_steps(const TensorTree& batch) {
  std::vector<std::int64_t> steps(static_cast<std::size_t>(batch.batch_size()[0]));
  std::int64_t torn = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) torn += row_consistent(batch, static_cast<std::int64_t>(i), steps[i]) ? 0 : 1;
  REQUIRE(torn == 0);
  return steps;
}

// Waits for a forked child and returns its exit status (-signal when killed).
inline int wait_child(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace replay_test
