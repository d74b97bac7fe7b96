// What the dist_ops tests share: the process's DistributedContext, the groups every operation is
// tried on (world, a sub-group, each mesh dimension), rank-dependent non-zero data, and checks
// that compare every element and say which one differs.
#pragma once

#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "dist_support.hpp"
#include "tensor_checks.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::test {


struct TestGroup {
  std::string name;
  Group group;
};

// Collective over the world: every rank gets the same list. The sub-group leaves out rank 0 (when
// three or more ranks remain) and lists the others in reverse, so group ranks differ from world ranks.
inline std::vector<TestGroup> test_groups() {
  const DistributedContext& ctx = context();
  const int n = ctx.size();
  std::vector<int> sub_ranks;
  for (int r = n - 1; r >= (n >= 3 ? 1 : 0); --r) sub_ranks.push_back(r);
  const std::vector<MeshDim> dims = n % 2 == 0 ? std::vector<MeshDim>{{"dp", n / 2}, {"tp", 2}}
                                               : std::vector<MeshDim>{{"dp", n}, {"tp", 1}};
  const DeviceMesh mesh = ctx.mesh(dims);
  return {{"world", ctx.world()},
          {"sub-group", ctx.new_group(sub_ranks)},
          {"mesh dim dp", mesh.group("dp")},
          {"mesh dim tp", mesh.group("tp")}};
}

// Runs `body` on every test group this rank is a member of.
inline void for_each_group(const std::function<void(const Group&)>& body) {
  for (const TestGroup& test_group : test_groups()) {
    if (!test_group.group.is_member()) continue;
    INFO("group: " << test_group.name << " (size " << test_group.group.size() << ", rank "
                   << test_group.group.rank() << ")");
    body(test_group.group);
  }
}

// Collective over the world: every rank again, in a group of its own whose waits end in Timeout
// after `timeout` (for tests that leave a group out of step on purpose), debug mode off.
inline Group all_ranks_with_timeout(std::chrono::milliseconds timeout) {
  std::vector<int> everyone(static_cast<std::size_t>(context().size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  GroupOptions options;
  options.timeout = timeout;
  options.debug_checks = false;
  return context().new_group(everyone, options);
}

// The root the tests use: the last rank, non-zero whenever the group has two or more ranks.
inline int last_rank(const Group& group) { return group.size() - 1; }

// One result per rank of `group`, each passing check(result, rank).
template <class T>
void check_one_per_rank(const std::vector<T>& results, const Group& group,
                        const std::function<void(const T&, int)>& check) {
  CHECK(results.size() == static_cast<std::size_t>(group.size()));
  for (std::size_t r = 0; r < results.size(); ++r) {
    INFO("from rank " << r);
    check(results[r], static_cast<int>(r));
  }
}

// What a gather leaves: on the root one result per rank, each passing `check`; elsewhere none.
template <class T>
void check_gathered(const std::vector<T>& results, const Group& group, int root,
                    const std::function<void(const T&, int)>& check) {
  if (group.rank() == root) {
    check_one_per_rank(results, group, check);
  } else {
    CHECK(results.empty());
  }
}


// `value` as the dtype stores it (float32 rounds, integers truncate).
inline double as_stored(DType dtype, double value) {
  return visit_dtype(dtype, [value](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      return static_cast<double>(static_cast<T>(value));
    } else {
      return value;
    }
  });
}

// Empty when `actual` has this dtype and shape and element i equals expected(i) (as the dtype
// stores it, within `tolerance`) for every i; otherwise what differs, first mismatch included.
inline std::string mismatch(const Tensor& actual, DType dtype, const Shape& shape, const ValueAt& expected,
                            double tolerance = 0.0) {
  if (!actual.defined()) return "tensor is undefined";
  if (actual.dtype() != dtype || actual.shape() != shape) {
    return "got " + std::string(dtype_name(actual.dtype())) + shape_str(actual.shape()) + ", expected " +
           std::string(dtype_name(dtype)) + shape_str(shape);
  }
  for (std::int64_t i = 0; i < actual.numel(); ++i) {
    const double got = actual.value_at_linear(i).real();
    const double want = as_stored(dtype, expected(i));
    if (std::abs(got - want) > tolerance) {
      return "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " + std::to_string(want);
    }
  }
  return {};
}

// The message of the E that `call` throws, or a description of what happened instead.
template <class E, class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const E& error) {
    return error.what();
  } catch (const std::exception& error) {
    return std::string("a different exception: ") + error.what();
  }
  return "no exception";
}

// ---- values -------------------------------------------------------------------------------------
// Distinct per rank and element, never zero, exact in float32.
inline ValueAt values_of(int rank) {
  return [rank](std::int64_t i) { return rank_value(rank, i); };
}

// Small rank-dependent values (1..7) whose products over four ranks stay exact in every dtype tested.
inline double small_value(int rank, std::int64_t i) { return static_cast<double>((rank * 3 + i) % 7 + 1); }

// Bit patterns that differ per rank and share the top bit of a byte, so AND is never all zeros.
inline double bits_value(int rank, std::int64_t i) {
  return static_cast<double>(0x80 | (((i + 1) * 37 + rank * 11) & 0x7f));
}

inline bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor;
}

// What reducing value(0..ranks-1) with `op` gives; `integral` selects Avg's integer division.
inline double reduced(ReduceOp op, int ranks, bool integral, const std::function<double(int)>& value) {
  auto acc = static_cast<std::int64_t>(value(0));
  double total = value(0);
  for (int r = 1; r < ranks; ++r) {
    const double v = value(r);
    const auto bits = static_cast<std::int64_t>(v);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: total += v; break;
      case ReduceOp::Product: total *= v; break;
      case ReduceOp::Min: total = std::min(total, v); break;
      case ReduceOp::Max: total = std::max(total, v); break;
      case ReduceOp::BitwiseAnd: acc &= bits; break;
      case ReduceOp::BitwiseOr: acc |= bits; break;
      case ReduceOp::BitwiseXor: acc ^= bits; break;
    }
  }
  if (is_bitwise(op)) return static_cast<double>(acc);
  if (op != ReduceOp::Avg) return total;
  return integral ? static_cast<double>(static_cast<std::int64_t>(total) / ranks) : total / ranks;
}

inline constexpr ReduceOp kArithmeticOps[] = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max,
                                              ReduceOp::Avg};
inline constexpr ReduceOp kBitwiseOps[] = {ReduceOp::BitwiseAnd, ReduceOp::BitwiseOr, ReduceOp::BitwiseXor};

}  // namespace tensortree::test
