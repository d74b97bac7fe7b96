// InProcessBootstrap: the rounds threads of one process use to find each other, matched by order,
// their sub-groups, and the Timeout of a round a member never joins.
#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/in_process/in_process_bootstrap.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;
using namespace tensortree::detail;

namespace {

// Runs body(bootstrap) on a thread per rank; the failures, by rank, come back (Catch2 asserts on
// this thread only).
std::vector<std::string> on_threads(std::vector<std::unique_ptr<InProcessBootstrap>>& bootstraps,
                                    const std::function<void(InProcessBootstrap&)>& body) {
  std::vector<std::string> failures(bootstraps.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < bootstraps.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*bootstraps[r]);
      } catch (const std::exception& error) {
        failures[r] = error.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return failures;
}

std::vector<std::byte> bytes_of(int value) {
  return {static_cast<std::byte>(value), static_cast<std::byte>(value + 1)};
}

}  // namespace

TEST_CASE("in-process bootstrap rounds: all_gather, broadcast and barrier across four threads") {
  auto bootstraps = make_in_process_bootstraps(4, std::chrono::seconds(20));
  std::vector<std::vector<std::byte>> gathered(4);
  std::vector<std::vector<std::byte>> broadcast(4);
  const auto failures = on_threads(bootstraps, [&](InProcessBootstrap& bootstrap) {
    const int rank = bootstrap.rank();
    gathered[static_cast<std::size_t>(rank)] = bootstrap.all_gather(bytes_of(10 * (rank + 1)));
    bootstrap.barrier();
    std::vector<std::byte> mine = bytes_of(rank == 2 ? 77 : rank);
    bootstrap.broadcast(mine, 2);
    broadcast[static_cast<std::size_t>(rank)] = mine;
  });
  CHECK(failures == std::vector<std::string>(4));
  std::vector<std::byte> expected;
  for (int r = 0; r < 4; ++r) {
    const auto each = bytes_of(10 * (r + 1));
    expected.insert(expected.end(), each.begin(), each.end());
  }
  for (int r = 0; r < 4; ++r) {
    CHECK(gathered[static_cast<std::size_t>(r)] == expected);
    CHECK(broadcast[static_cast<std::size_t>(r)] == bytes_of(77));
  }
}

TEST_CASE("in-process split makes sub-groups by color, ranked by key, each with rounds of its own") {
  auto bootstraps = make_in_process_bootstraps(5, std::chrono::seconds(20));
  std::vector<int> sub_rank(5, -2);
  std::vector<int> sub_size(5, -2);
  std::vector<std::vector<std::byte>> gathered(5);
  const auto failures = on_threads(bootstraps, [&](InProcessBootstrap& bootstrap) {
    const int rank = bootstrap.rank();
    // Evens and odds; rank 4 stays out; keys reverse the order within a color.
    const int color = rank == 4 ? -1 : rank % 2;
    std::unique_ptr<Bootstrap> sub = bootstrap.split(color, 10 - rank);
    if (!sub) return;
    sub_rank[static_cast<std::size_t>(rank)] = sub->rank();
    sub_size[static_cast<std::size_t>(rank)] = sub->size();
    gathered[static_cast<std::size_t>(rank)] = sub->all_gather(bytes_of(rank));
  });
  CHECK(failures == std::vector<std::string>(5));
  CHECK(sub_rank == std::vector<int>{1, 1, 0, 0, -2});
  CHECK(sub_size == std::vector<int>{2, 2, 2, 2, -2});
  const auto pair = [](int first, int second) {
    std::vector<std::byte> all = bytes_of(first);
    const auto next = bytes_of(second);
    all.insert(all.end(), next.begin(), next.end());
    return all;
  };
  CHECK(gathered[0] == pair(2, 0));
  CHECK(gathered[1] == pair(3, 1));
  CHECK(gathered[2] == pair(2, 0));
  CHECK(gathered[3] == pair(3, 1));
}

TEST_CASE("a bootstrap round a member never joins ends with Timeout naming the round and the missing rank") {
  auto bootstraps = make_in_process_bootstraps(3, std::chrono::milliseconds(150));
  const auto failures = on_threads(bootstraps, [&](InProcessBootstrap& bootstrap) {
    bootstrap.barrier();
    if (bootstrap.rank() != 1) bootstrap.all_gather(bytes_of(1));
  });
  for (const int rank : {0, 2}) {
    INFO(failures[static_cast<std::size_t>(rank)]);
    CHECK(failures[static_cast<std::size_t>(rank)].find("all_gather (round 1)") != std::string::npos);
    CHECK(failures[static_cast<std::size_t>(rank)].find("ranks [1] did not arrive") != std::string::npos);
  }
  CHECK(failures[1].empty());
}

TEST_CASE("members calling different operations in one round all fail at once with InvalidArgument naming both") {
  auto bootstraps = make_in_process_bootstraps(3, std::chrono::seconds(60));
  const auto started = std::chrono::steady_clock::now();
  const auto failures = on_threads(bootstraps, [&](InProcessBootstrap& bootstrap) {
    if (bootstrap.rank() == 1) {
      bootstrap.all_gather(bytes_of(1));
    } else {
      bootstrap.barrier();
    }
  });
  // Not the minute of the timeout: the members already waiting are told.
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  for (const std::string& failure : failures) {
    INFO(failure);
    CHECK(failure.find("calls ") != std::string::npos);
    CHECK(failure.find("barrier") != std::string::npos);
    CHECK(failure.find("all_gather") != std::string::npos);
  }
}

TEST_CASE("a sub-group's store made after its parent's store was aborted is aborted too") {
  auto bootstraps = make_in_process_bootstraps(2, std::chrono::seconds(60));
  const std::shared_ptr<InProcessStore>& parent = bootstraps.front()->store();
  // A split round that completed just before the abort: its members take the child afterwards.
  parent->abort("rank 1 failed");
  const std::shared_ptr<InProcessStore> child = parent->child(0, 0, 1);
  CHECK_THROWS_WITH(child->exchange(0, 0, "barrier", {}), Catch::Contains("rank 1 failed"));
}
