// What every element of the job holds: each value derives from the row's (actor, trajectory,
// step), or from the weight version, so the learner recomputes every sampled element and an actor
// every element of the weights it leases.
#pragma once

#include <cstdint>

#include "tensortree/tree.hpp"

namespace shared_job {

// The weights of version v: "policy/weight" (float32 [params]) and "policy/version" (int64 [1]).
tensortree::TensorTree make_params(std::int64_t params);
void fill_params(const tensortree::TensorTree& params, std::int64_t version);
// Elements of `params` (a leased version) that differ from what `version` must hold.
std::int64_t wrong_param_elements(const tensortree::TensorTree& params, std::int64_t version);

// One trajectory of `steps` rows: actor, trajectory, step, policy_version, observation [obs_dim],
// action, next/reward, next/done.
tensortree::TensorTree make_trajectory(std::int64_t steps, std::int64_t obs_dim);
// Fills every row for (actor, trajectory) acting with `weights` of `version` (action reads them).
void fill_trajectory(tensortree::TensorTree& trajectory, std::int64_t actor, std::int64_t trajectory_id,
                     const tensortree::TensorTree& weights, std::int64_t version);

// What the learner knows when it checks a batch.
struct RowRules {
  std::int64_t steps = 0;          // rows per trajectory
  std::int64_t max_actor_ids = 0;  // valid actor ids are below this
  std::int64_t newest_version = 0;  // no row can carry a newer one
  std::int64_t params = 0;          // elements of policy/weight (the action reads one)
};

// Elements of `batch` (a sample) that differ from what their row's (actor, trajectory, step,
// policy_version) determine; the first few are printed.
std::int64_t wrong_row_elements(const tensortree::TensorTree& batch, const RowRules& rules);

// Elements of the identifying columns of one whole trajectory, as an actor sent it, that differ
// from `actor`, `trajectory_id` and step = row; the first few are printed.
std::int64_t wrong_trajectory_identity(const tensortree::TensorTree& trajectory, std::int64_t actor,
                                       std::int64_t trajectory_id);

// Rows of `batch` whose actor id lies in [begin, end).
std::int64_t rows_of_actors(const tensortree::TensorTree& batch, std::int64_t begin, std::int64_t end);

}  // namespace shared_job
