#include "values.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "tensortree/error.hpp"
#include "tensortree/policy_version.hpp"

using namespace tensortree;

namespace shared_job {

namespace {

// SplitMix64 over the words: a value that changes with every one of them.
std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (const std::uint64_t word : {a, b, c, d}) {
    h ^= word + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBULL;
    h ^= h >> 31;
  }
  return h;
}

// 24 bits: exact in a float32.
float exact_float(std::uint64_t h) { return static_cast<float>(h & 0xFFFFFF); }

float weight_value(std::int64_t version, std::int64_t i) {
  return exact_float(mix(static_cast<std::uint64_t>(version), static_cast<std::uint64_t>(i), 0, 1));
}
float obs_value(std::int64_t actor, std::int64_t traj, std::int64_t step, std::int64_t j) {
  return exact_float(mix(static_cast<std::uint64_t>(actor), static_cast<std::uint64_t>(traj),
                         static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(j) + 16));
}
float reward_value(std::int64_t actor, std::int64_t traj, std::int64_t step) {
  return exact_float(mix(static_cast<std::uint64_t>(actor), static_cast<std::uint64_t>(traj),
                         static_cast<std::uint64_t>(step), 2)) / 256.0F;
}
// The weight element the action at `step` reads.
std::int64_t action_index(std::int64_t actor, std::int64_t step, std::int64_t params) {
  return (actor * 7919 + step) % params;
}

const Path kWeight{"policy", "weight"};
const Path kVersion{"policy", "version"};
const Path kReward{"next", "reward"};
const Path kDone{"next", "done"};

// A leaf's elements: the job's trees (built here, leased, or sampled into one buffer) are contiguous.
template <class T>
T* leaf(const TensorTree& tree, PathRef path) {
  const Tensor& tensor = tree.get(path);
  if (!tensor.is_contiguous()) throw InvalidArgument("shared_job: a leaf that is not contiguous");
  return tensor.data<T>();
}

int printed_errors = 0;

// `where` names the row (actor, trajectory, step, version) or the weights' version.
template <class T, class Where>
void report_wrong(const char* what, const Where& where, std::int64_t index, T expected, T got) {
  if (printed_errors >= 10) return;
  ++printed_errors;
  std::fprintf(stderr, "wrong element: %s[%" PRId64 "] of %s: expected %s, got %s\n", what, index, where().c_str(),
               std::to_string(expected).c_str(), std::to_string(got).c_str());
}

}  // namespace

TensorTree make_params(std::int64_t params) {
  TensorTree tree(Shape{});
  tree.set(kWeight, Tensor::empty({params}, {DType::Float32}));
  tree.set(kVersion, Tensor::empty({1}, {DType::Int64}));
  return tree;
}

void fill_params(const TensorTree& params, std::int64_t version) {
  float* weight = leaf<float>(params, kWeight);
  const std::int64_t n = params.get(kWeight).numel();
  for (std::int64_t i = 0; i < n; ++i) weight[i] = weight_value(version, i);
  *leaf<std::int64_t>(params, kVersion) = version;
}

std::int64_t wrong_param_elements(const TensorTree& params, std::int64_t version) {
  std::int64_t wrong = 0;
  const auto where = [version] { return "weights version " + std::to_string(version); };
  const float* weight = leaf<float>(params, kWeight);
  const std::int64_t n = params.get(kWeight).numel();
  for (std::int64_t i = 0; i < n; ++i) {
    if (weight[i] != weight_value(version, i)) {
      report_wrong("policy/weight", where, i, weight_value(version, i), weight[i]);
      ++wrong;
    }
  }
  const std::int64_t stored = *leaf<std::int64_t>(params, kVersion);
  if (stored != version) {
    report_wrong("policy/version", where, 0, version, stored);
    ++wrong;
  }
  return wrong;
}

TensorTree make_trajectory(std::int64_t steps, std::int64_t obs_dim) {
  TensorTree traj(Shape{steps});
  for (const char* key : {"actor", "trajectory", "step", "action"}) {
    traj.set(key, Tensor::empty({steps}, {DType::Int64}));
  }
  traj.set("observation", Tensor::empty({steps, obs_dim}, {DType::Float32}));
  traj.set(kReward, Tensor::empty({steps}, {DType::Float32}));
  traj.set(kDone, Tensor::empty({steps}, {DType::Bool}));
  return traj;
}

void fill_trajectory(TensorTree& trajectory, std::int64_t actor, std::int64_t trajectory_id,
                     const TensorTree& weights, std::int64_t version) {
  const std::int64_t steps = trajectory.batch_size()[0];
  const std::int64_t obs_dim = trajectory.get("observation").shape()[1];
  const float* weight = leaf<float>(weights, kWeight);
  const std::int64_t params = weights.get(kWeight).numel();
  float* obs = leaf<float>(trajectory, "observation");
  for (std::int64_t s = 0; s < steps; ++s) {
    leaf<std::int64_t>(trajectory, "actor")[s] = actor;
    leaf<std::int64_t>(trajectory, "trajectory")[s] = trajectory_id;
    leaf<std::int64_t>(trajectory, "step")[s] = s;
    for (std::int64_t j = 0; j < obs_dim; ++j) obs[s * obs_dim + j] = obs_value(actor, trajectory_id, s, j);
    leaf<std::int64_t>(trajectory, "action")[s] = static_cast<std::int64_t>(weight[action_index(actor, s, params)]);
    leaf<float>(trajectory, kReward)[s] = reward_value(actor, trajectory_id, s);
    leaf<bool>(trajectory, kDone)[s] = s == steps - 1;
  }
  stamp_policy_version(trajectory, version);
}

std::int64_t wrong_row_elements(const TensorTree& batch, const RowRules& rules) {
  const TensorTree& rows = batch;
  const std::int64_t n = rows.batch_size()[0];
  const std::int64_t obs_dim = rows.get("observation").shape()[1];
  const float* obs = leaf<float>(rows, "observation");
  std::int64_t wrong = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t actor = leaf<std::int64_t>(rows, "actor")[r];
    const std::int64_t traj = leaf<std::int64_t>(rows, "trajectory")[r];
    const std::int64_t step = leaf<std::int64_t>(rows, "step")[r];
    const std::int64_t version = leaf<std::int64_t>(rows, kPolicyVersionKey)[r];
    // The identifying columns themselves: a torn or stray row shows up here or in the values.
    if (actor < 0 || actor >= rules.max_actor_ids || traj < 0 || step < 0 || step >= rules.steps || version < 1 ||
        version > rules.newest_version) {
      if (printed_errors++ < 10) {
        std::fprintf(stderr, "wrong row %" PRId64 ": actor %" PRId64 ", trajectory %" PRId64 ", step %" PRId64
                     ", version %" PRId64 " out of range\n", r, actor, traj, step, version);
      }
      wrong += 4;  // the four identifying elements
      continue;
    }
    const auto where = [&] {
      return "batch row " + std::to_string(r) + " (actor " + std::to_string(actor) + ", trajectory " +
             std::to_string(traj) + ", step " + std::to_string(step) + ", version " + std::to_string(version) + ")";
    };
    for (std::int64_t j = 0; j < obs_dim; ++j) {
      const float expected = obs_value(actor, traj, step, j);
      const float got = obs[r * obs_dim + j];
      if (got != expected) {
        report_wrong("observation", where, j, expected, got);
        ++wrong;
      }
    }
    const auto action = static_cast<std::int64_t>(weight_value(version, action_index(actor, step, rules.params)));
    const std::int64_t got_action = leaf<std::int64_t>(rows, "action")[r];
    if (got_action != action) {
      report_wrong("action", where, 0, action, got_action);
      ++wrong;
    }
    const float reward = leaf<float>(rows, kReward)[r];
    if (reward != reward_value(actor, traj, step)) {
      report_wrong("next/reward", where, 0, reward_value(actor, traj, step), reward);
      ++wrong;
    }
    const bool done = leaf<bool>(rows, kDone)[r];
    if (done != (step == rules.steps - 1)) {
      report_wrong("next/done", where, 0, step == rules.steps - 1, done);
      ++wrong;
    }
  }
  return wrong;
}

std::int64_t wrong_trajectory_identity(const TensorTree& trajectory, std::int64_t actor, std::int64_t trajectory_id) {
  const std::int64_t steps = trajectory.batch_size()[0];
  const auto where = [&] { return "actor " + std::to_string(actor) + "'s trajectory " + std::to_string(trajectory_id); };
  std::int64_t wrong = 0;
  const auto expect = [&](const char* column, std::int64_t row, std::int64_t expected) {
    const std::int64_t got = leaf<std::int64_t>(trajectory, column)[row];
    if (got == expected) return;
    report_wrong(column, where, row, expected, got);
    ++wrong;
  };
  for (std::int64_t s = 0; s < steps; ++s) {
    expect("actor", s, actor);
    expect("trajectory", s, trajectory_id);
    expect("step", s, s);
  }
  return wrong;
}

std::int64_t rows_of_actors(const TensorTree& batch, std::int64_t begin, std::int64_t end) {
  const std::int64_t* actor = leaf<std::int64_t>(batch, "actor");
  std::int64_t rows = 0;
  for (std::int64_t r = 0; r < batch.batch_size()[0]; ++r) rows += actor[r] >= begin && actor[r] < end ? 1 : 0;
  return rows;
}

}  // namespace shared_job
