// Crash safety: a child process saves two alternating versions of a tree into one directory as
// fast as it can and is SIGKILLed at a random moment, many times. Every time, the directory must
// hold one whole version, loadable, never a mix; temporary directories of killed saves are cleaned
// up by the next save.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "memmap_test_support.hpp"

using namespace tensortree;
using namespace memmap_test;

namespace {

constexpr int kKills = 200;

// Version 2 differs in every value and has one more leaf, so a mix of the two cannot pass.
TensorTree version(int v) {
  TensorTree tree(Shape{8});
  tree.set(Path{"obs"}, patterned({8, 256}, DType::Float32, v));
  tree.set(Path{"next", "reward"}, patterned({8}, DType::Float64, 10 + v));
  tree.set(Path{"next", "deep", "done"}, patterned({8, 3}, DType::Int64, 20 + v));
  tree.set(Path{"action"}, patterned({8, 4}, DType::Int32, 30 + v));
  if (v == 2) tree.set(Path{"v2_only"}, patterned({8, 2}, DType::UInt8, 40));
  return tree;
}

bool same_tree(const TensorTree& a, const TensorTree& b) {
  if (a.batch_size() != b.batch_size() || a.keys({.include_nested = true}) != b.keys({.include_nested = true})) return false;
  for (const auto& [path, leaf] : b.leaves()) {
    const Tensor& other = a.get(path);
    if (other.shape() != leaf.shape() || other.dtype() != leaf.dtype() || bytes_of(other) != bytes_of(leaf)) return false;
  }
  return true;
}

[[noreturn]] void save_forever(const fs::path& dir) {
  try {
    for (int v = 2;; v = 3 - v) {
      TensorTree tree = version(v);
      tree.memmap_(dir, {.overwrite = MemmapOverwrite::Replace, .threads = 1});
    }
  } catch (...) {
    ::_exit(3);
  }
}

std::size_t entries_in(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("a save killed at any moment leaves the old or the new tree, whole") {
  const ScratchDir scratch;
  const fs::path dir = scratch / "replay";
  const TensorTree versions[2] = {version(1), version(2)};
  // Kills land anywhere within about three saves, however fast this machine's fsync is.
  const auto start = std::chrono::steady_clock::now();
  {
    TensorTree first = version(1);
    first.memmap_(dir);
  }
  const auto save_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  std::mt19937 random(12345);
  std::uniform_int_distribution<long> delay_us(0, std::clamp<long>(3 * save_us.count(), 1000, 60000));
  int seen[2] = {0, 0};
  int with_leftovers = 0;
  for (int i = 0; i < kKills; ++i) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) save_forever(dir);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
    ::kill(child, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFSIGNALED(status));  // killed mid-loop, not failed

    const TensorTree loaded = TensorTree::load_memmap(dir);
    const bool is_v1 = same_tree(loaded, versions[0]);
    const bool is_v2 = same_tree(loaded, versions[1]);
    INFO("kill " << i);
    REQUIRE((is_v1 || is_v2));
    ++seen[is_v1 ? 0 : 1];
    if (entries_in(scratch.path()) > 1) ++with_leftovers;
  }
  WARN("one save took " << save_us.count() << " us; " << kKills << " kills: the directory held version 1 " << seen[0] << " times, version 2 " << seen[1]
              << " times; " << with_leftovers << " kills left a temporary directory behind");
  CHECK(seen[0] + seen[1] == kKills);

  // The next save removes what killed saves left and publishes normally.
  TensorTree last = version(2);
  last.memmap_(dir, {.overwrite = MemmapOverwrite::Replace});
  CHECK(entries_in(scratch.path()) == 1);
  CHECK(same_tree(TensorTree::load_memmap(dir), versions[1]));
}

TEST_CASE("two processes saving to one directory at once leave one whole tree") {
  const ScratchDir scratch;
  const fs::path dir = scratch / "shared";
  const TensorTree versions[2] = {version(1), version(2)};
  std::vector<pid_t> children;
  for (int v = 1; v <= 2; ++v) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int status = 0;
      try {
        for (int i = 0; i < 20; ++i) {
          TensorTree tree = version(v);
          tree.memmap_(dir, {.overwrite = MemmapOverwrite::Replace, .threads = 1, .durable = false});
          // One load, compared with both: two loads may each see another save's tree.
          const TensorTree loaded = TensorTree::load_memmap(dir);
          if (!same_tree(loaded, versions[0]) && !same_tree(loaded, versions[1])) status = 2;
        }
      } catch (...) {
        status = 3;
      }
      ::_exit(status);
    }
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  const TensorTree loaded = TensorTree::load_memmap(dir);
  CHECK((same_tree(loaded, versions[0]) || same_tree(loaded, versions[1])));
  CHECK(entries_in(scratch.path()) == 1);  // each loser removed its own temporary directory
}
