// The checks: every element of every trajectory the learner receives against what its stamp says it
// must hold (expected.hpp), each obs row against the actor's XXH3, every stacked batch against the
// trajectories it was stacked from, and every broadcast parameter tree against its version. A
// mismatch names the actor, sequence number, key, index, expected and received value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "expected.hpp"
#include "job.hpp"
#include "tensortree/tensortree.hpp"

namespace actor_learner {

// Counts the checks and the failed ones; prints the first few mismatches in detail.
class Verdicts {
 public:
  explicit Verdicts(std::string who) : who_(std::move(who)) {}

  void pass() { ++checks_; }
  void fail(const std::string& what);
  void expect(bool ok, const std::string& what) { ok ? pass() : fail(what); }

  std::int64_t checks() const { return checks_; }
  std::int64_t failures() const { return failures_; }
  std::int64_t passed() const { return checks_ - failures_; }

 private:
  std::string who_;
  std::int64_t checks_ = 0;
  std::int64_t failures_ = 0;
  int printed_ = 0;
};

// What a batch's statistics must come to, summed over its trajectories (from the formulas, not the data).
struct TrajectoryStats {
  double reward_sum = 0;
  std::int64_t done_count = 0;

  TrajectoryStats& operator+=(const TrajectoryStats& other) {
    reward_sum += other.reward_sum;
    done_count += other.done_count;
    return *this;
  }
};

// Checks every element of a CPU trajectory against what `stamp` says it must hold.
TrajectoryStats check_trajectory(Verdicts& v, const tensortree::TensorTree& tree, const Options& o,
                                 const Stamp& stamp);

// Checks what from_remote_init(actor) returned: a consolidated tree of batch size [T, B] holding the
// actor's first trajectory (seq 0).
void check_first_trajectory(Verdicts& v, const tensortree::TensorTree& first, const Options& o, int actor);

// What the learner reports about a batch.
struct BatchStats {
  double mean_reward = 0;
  double done_fraction = 0;
  std::uint64_t obs_hash = 0;
};

// Checks batch number `number` (1-based), stacked from `sources`: its batch size, the XXH3 of its obs
// against that of the sources' obs in turn, and its reward sum and done count against `expected`.
BatchStats check_batch(Verdicts& v, int number, std::span<const tensortree::TensorTree> sources,
                       const tensortree::TensorTree& stacked, const TrajectoryStats& expected, const Options& o);

// Checks a broadcast parameter tree against version `version`.
void check_params(Verdicts& v, const tensortree::TensorTree& received, std::int64_t version, int rank);

}  // namespace actor_learner
