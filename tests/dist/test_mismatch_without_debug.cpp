// Mismatched collectives with debug mode off: the library cannot see every mismatch then (that is
// what debug mode is for), but none may take the job down or hang. A size mismatch that MPI sees is
// a typed error on the ranks that see it; the others finish, or end in Timeout within the group's
// timeout. Each case runs on a group of its own, aborted afterwards, since a mismatch may leave the
// ranks out of step.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops_test_support.hpp"
#include "tensortree/dist_ops.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kGroupTimeout = std::chrono::milliseconds(1500);

enum class Outcome { Completed, TypedError, OtherError };

// Runs `call` on a fresh group; returns how it ended on this rank, after checking it ended in time.
Outcome run_mismatched(const std::function<void(const Group&)>& call) {
  const Group group = all_ranks_with_timeout(kGroupTimeout);
  const auto started = Clock::now();
  Outcome outcome = Outcome::Completed;
  std::string what = "completed";
  try {
    call(group);
  } catch (const InvalidArgument& error) {
    outcome = Outcome::TypedError, what = error.what();
  } catch (const Timeout& error) {
    outcome = Outcome::TypedError, what = error.what();
  } catch (const BackendError& error) {
    outcome = Outcome::TypedError, what = error.what();
  } catch (const std::exception& error) {
    outcome = Outcome::OtherError, what = error.what();
  }
  INFO("rank " << group.rank() << ": " << what);
  CHECK(outcome != Outcome::OtherError);
  CHECK(Clock::now() - started < kGroupTimeout * 3);
  group.abort("a mismatched collective left it out of step (test)");
  dist::barrier(context().world());  // every rank is past its case before the next begins
  return outcome;
}

bool odd_one() { return world_rank() == world_size() - 1; }

// How many ranks of world ended their case with a typed error.
int ranks_with_typed_errors(Outcome outcome) {
  Tensor count = Tensor::full({1}, outcome == Outcome::TypedError ? 1.0 : 0.0, {DType::Int32});
  dist::all_reduce(count, context().world());
  return *static_cast<const std::int32_t*>(count.data_ptr());
}

Tensor ones(std::int64_t count) { return Tensor::full({count}, 1.0); }

}  // namespace

TEST_CASE("without debug mode: all_reduce with a longer tensor on one rank is a typed error, not an abort",
          "[mismatch]") {
  const Outcome outcome = run_mismatched([](const Group& group) { dist::all_reduce(ones(odd_one() ? 4096 : 16), group); });
  CHECK(ranks_with_typed_errors(outcome) >= 1);
}

TEST_CASE("without debug mode: all_gather of different lengths is a typed error, not an abort", "[mismatch]") {
  const Outcome outcome = run_mismatched([](const Group& group) { dist::all_gather(ones(odd_one() ? 4096 : 16), group); });
  CHECK(ranks_with_typed_errors(outcome) >= 1);
}

TEST_CASE("without debug mode: a broadcast receiver smaller than the root's tensor gets a typed error", "[mismatch]") {
  const Outcome outcome = run_mismatched([](const Group& group) {
    Tensor tensor = ones(odd_one() ? 16 : 4096);
    dist::broadcast(tensor, 0, group);
  });
  if (odd_one()) CHECK(outcome == Outcome::TypedError);
  ranks_with_typed_errors(outcome);
}

// MPI cannot see this one (the receiver simply gets fewer elements): only debug mode names it.
// Without it the promise is only that nothing aborts or hangs.
TEST_CASE("without debug mode: a broadcast receiver larger than the root's tensor ends in time", "[mismatch]") {
  const Outcome outcome = run_mismatched([](const Group& group) {
    Tensor tensor = ones(odd_one() ? 4096 : 16);
    dist::broadcast(tensor, 0, group);
  });
  ranks_with_typed_errors(outcome);
}
