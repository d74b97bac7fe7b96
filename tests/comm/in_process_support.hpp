// What the in-process group tests share: ranks as threads (runtime/in_process_world.hpp),
// rank-dependent non-zero values, and element checks that throw (Catch2's assertions are for the
// main thread only; run_in_process rethrows a rank's failure there).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/in_process_world.hpp"
#include "tensor_checks.hpp"
#include "tensortree/group.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::test {

// Non-zero, naming the rank and the element: 1000 * (rank + 1) + index + 1 (exact in float32).
inline double rank_value(int rank, std::int64_t index) { return 1000.0 * (rank + 1) + static_cast<double>(index) + 1; }

inline GroupOptions quick_options(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  GroupOptions options;
  options.timeout = timeout;
  return options;
}

// Every rank's body ran to its end (a rank's exception is rethrown here, on the test's thread).
inline void run_ranks(int size, const std::function<void(const Group&)>& body,
                      const GroupOptions& options = quick_options()) {
  std::atomic<int> finished{0};
  detail::run_in_process(size, options, [&](const Group& group) {
    body(group);
    finished.fetch_add(1);
  });
  REQUIRE(finished.load() == size);
}


// Throws, naming `what`, the rank and the element, unless every element i of `actual` equals
// expected(i) as `actual`'s dtype stores it.
inline void expect_elements(const Tensor& actual, std::int64_t numel, const ValueAt& expected, const std::string& what,
                            int rank) {
  const auto where = [&] { return what + " on rank " + std::to_string(rank); };
  if (actual.numel() != numel) {
    throw std::runtime_error(where() + ": " + std::to_string(actual.numel()) + " elements, expected " +
                             std::to_string(numel));
  }
  const Tensor reference = make_tensor({numel}, actual.dtype(), expected);
  const Tensor contiguous = actual.contiguous();
  for (std::int64_t i = 0; i < numel; ++i) {
    const double got = contiguous.value_at_linear(i).real();
    const double want = reference.value_at_linear(i).real();
    if (got != want) {
      throw std::runtime_error(where() + ": element " + std::to_string(i) + " is " + std::to_string(got) +
                               ", expected " + std::to_string(want));
    }
  }
}

inline void expect(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error(what);
}

// One slot per rank, written by the rank's thread, read by the test after run_ranks returned.
template <class T>
struct PerRank {
  explicit PerRank(int size) : values(static_cast<std::size_t>(size)) {}
  T& operator[](int rank) { return values[static_cast<std::size_t>(rank)]; }
  std::vector<T> values;
};

}  // namespace tensortree::test
