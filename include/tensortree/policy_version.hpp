// Versions carried by data: every trajectory names the policy version that produced it, and the
// learner drops rows that lag too far behind the version it trains, reporting the lag it sees (as
// Sample Factory's max_policy_lag does).
#pragma once

#include <cstdint>

#include "tensortree/export.hpp"
#include "tensortree/path.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

// The leaf stamp_policy_version writes and drop_stale_rows reads.
inline constexpr const char* kPolicyVersionKey = "policy_version";

// Sets leaf `key` of `trajectory` to an int64 tensor of the tree's batch_size holding `version`
// in every element (replacing an existing leaf there). InvalidArgument when version is negative.
TT_API void stamp_policy_version(TensorTree& trajectory, std::int64_t version, PathRef key = kPolicyVersionKey);

// What the learner saw in one batch. A row's lag is current_version minus the oldest version in it.
struct PolicyLag {
  std::int64_t rows = 0;     // rows looked at
  std::int64_t dropped = 0;  // rows whose lag exceeded max_lag
  std::int64_t max_lag = 0;  // over all rows looked at
  double mean_lag = 0;       // over all rows looked at
};

struct FreshRows {
  TensorTree rows;  // the rows kept (a copy; the batch itself when none was dropped)
  PolicyLag lag;
};

// Keeps the rows (first batch dimension) of `batch` whose lag is at most `max_lag`. The leaf at
// `key` is an integer tensor whose shape starts with the batch's first dimension (as stamped).
// InvalidArgument naming the row when a row's version is newer than `current_version` or negative.
TT_API FreshRows drop_stale_rows(const TensorTree& batch, std::int64_t current_version, std::int64_t max_lag,
                                 PathRef key = kPolicyVersionKey);

}  // namespace tensortree
