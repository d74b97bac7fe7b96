#include "checks.hpp"

#include <xxhash.h>

#include <cinttypes>
#include <vector>

#include "output.hpp"

namespace actor_learner {

using tensortree::Device;
using tensortree::Shape;
using tensortree::shape_str;
using tensortree::Tensor;
using tensortree::TensorTree;

namespace {

constexpr int kMaxPrintedMismatches = 20;

std::string value_text(std::uint8_t v) { return std::to_string(static_cast<unsigned>(v)); }
std::string value_text(bool v) { return v ? "true" : "false"; }
std::string value_text(std::int64_t v) { return std::to_string(v); }
std::string value_text(std::uint64_t v) { return std::to_string(v); }
std::string value_text(float v) { return format("%.9g", static_cast<double>(v)); }

// Compares every element of a leaf with expected(i): one check per leaf, and on a mismatch the first
// differing element and how many differ.
template <class T, class Expected>
void check_leaf(Verdicts& verdicts, const Stamp& stamp, const TensorTree& tree, const char* path, Expected expected) {
  const Tensor data = tree.get(path).contiguous();
  const T* p = data.data<T>();
  const auto count = static_cast<std::uint64_t>(data.numel());
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < count; ++i) wrong += p[i] != expected(i) ? 1 : 0;
  if (wrong == 0) {
    verdicts.pass();
    return;
  }
  std::uint64_t first = 0;
  while (first < count && p[first] == expected(first)) ++first;
  verdicts.fail(format("actor %" PRId64 " seq %" PRId64 " key %s index %" PRIu64 ": expected %s, got %s (%" PRIu64
                       " of %" PRIu64 " elements differ)",
                       stamp.actor, stamp.seq, path, first, value_text(static_cast<T>(expected(first))).c_str(),
                       value_text(p[first]).c_str(), wrong, count));
}

// A leaf that holds Value(base_of(stamp, key), i) at element i.
template <auto Value>
void check_generated(Verdicts& v, const Stamp& stamp, const TensorTree& tree, const Options& o, const char* path,
                     Key key) {
  const std::uint64_t base = base_of(o.seed, stamp, key);
  check_leaf<decltype(Value(0, 0))>(v, stamp, tree, path, [&](std::uint64_t i) { return Value(base, i); });
}

// The actor's XXH3 of each obs row against the rows as they arrived.
void check_row_hashes(Verdicts& v, const Stamp& stamp, const TensorTree& tree, const Options& o) {
  const Tensor obs = tree.get("obs").contiguous();
  const auto* rows = obs.data<std::uint8_t>();
  const std::size_t row = obs_row_bytes(o);
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(o.T * o.B));
  for (std::size_t r = 0; r < hashes.size(); ++r) hashes[r] = row_hash(rows + r * row, row, o.seed);
  check_leaf<std::uint64_t>(v, stamp, tree, "meta.obs_xxh3", [&](std::uint64_t r) { return hashes[r]; });
}

std::uint64_t obs_hash_of(std::span<const TensorTree> sources) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const TensorTree& tree : sources) {
    const Tensor obs = tree.get("obs").to(Device::cpu()).contiguous();
    XXH3_64bits_update(state, obs.data_ptr(), obs.nbytes());
  }
  const std::uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

}  // namespace

void Verdicts::fail(const std::string& what) {
  ++checks_;
  ++failures_;
  if (printed_ < kMaxPrintedMismatches) {
    complain("[" + who_ + "] MISMATCH " + what);
    ++printed_;
  } else if (printed_ == kMaxPrintedMismatches) {
    complain("[" + who_ + "] (further mismatches not printed)");
    ++printed_;
  }
}

TrajectoryStats check_trajectory(Verdicts& v, const TensorTree& tree, const Options& o, const Stamp& stamp) {
  check_leaf<std::int64_t>(v, stamp, tree, "meta.actor", [&](std::uint64_t) { return stamp.actor; });
  check_leaf<std::int64_t>(v, stamp, tree, "meta.seq", [&](std::uint64_t) { return stamp.seq; });
  check_leaf<std::int64_t>(v, stamp, tree, "meta.version", [&](std::uint64_t) { return stamp.version; });
  check_generated<obs_value>(v, stamp, tree, o, "obs", Key::Obs);
  check_generated<obs_value>(v, stamp, tree, o, "next.obs", Key::NextObs);
  check_generated<action_value>(v, stamp, tree, o, "action", Key::Action);
  check_generated<reward_value>(v, stamp, tree, o, "reward", Key::Reward);
  check_generated<done_value>(v, stamp, tree, o, "done", Key::Done);
  check_generated<episode_return_value>(v, stamp, tree, o, "info.episode_return", Key::EpisodeReturn);
  check_generated<episode_len_value>(v, stamp, tree, o, "info.episode_len", Key::EpisodeLen);
  check_row_hashes(v, stamp, tree, o);

  TrajectoryStats stats;
  const std::uint64_t reward_base = base_of(o.seed, stamp, Key::Reward);
  const std::uint64_t done_base = base_of(o.seed, stamp, Key::Done);
  const auto n = static_cast<std::uint64_t>(o.T * o.B);
  for (std::uint64_t i = 0; i < n; ++i) {
    stats.reward_sum += static_cast<double>(reward_value(reward_base, i));
    stats.done_count += done_value(done_base, i) ? 1 : 0;
  }
  return stats;
}

void check_first_trajectory(Verdicts& v, const TensorTree& first, const Options& o, int actor) {
  v.expect(first.is_consolidated(), format("from_remote_init(%d) returned a tree that is not consolidated", actor));
  v.expect(first.batch_size() == Shape{o.T, o.B},
           format("actor %d's trajectory has batch_size %s, expected [%" PRId64 ", %" PRId64 "]", actor,
                  shape_str(first.batch_size()).c_str(), o.T, o.B));
  check_trajectory(v, first.to(Device::cpu()), o, {actor, 0, 0});
}

BatchStats check_batch(Verdicts& v, int number, std::span<const TensorTree> sources, const TensorTree& stacked,
                       const TrajectoryStats& expected, const Options& o) {
  const std::uint64_t sources_hash = obs_hash_of(sources);
  const TensorTree batch = stacked.to(Device::cpu());
  const Shape want{static_cast<std::int64_t>(sources.size()), o.T, o.B};
  v.expect(batch.batch_size() == want, format("batch %d: stacked batch_size %s, expected %s", number,
                                              shape_str(batch.batch_size()).c_str(), shape_str(want).c_str()));
  const Tensor obs = batch.get("obs").contiguous();
  const std::uint64_t obs_hash = XXH3_64bits(obs.data_ptr(), obs.nbytes());
  v.expect(obs_hash == sources_hash, format("batch %d: obs checksum %016" PRIx64 " of the stacked batch, %016" PRIx64
                                            " over its trajectories",
                                            number, obs_hash, sources_hash));

  const Tensor reward = batch.get("reward").contiguous();
  const Tensor done = batch.get("done").contiguous();
  double reward_sum = 0;
  std::int64_t done_count = 0;
  for (std::int64_t i = 0; i < reward.numel(); ++i) reward_sum += static_cast<double>(reward.data<float>()[i]);
  for (std::int64_t i = 0; i < done.numel(); ++i) done_count += done.data<bool>()[i] ? 1 : 0;
  v.expect(reward_sum == expected.reward_sum,
           format("batch %d: reward sum %.6f, expected %.6f", number, reward_sum, expected.reward_sum));
  v.expect(done_count == expected.done_count, format("batch %d: %" PRId64 " done flags, expected %" PRId64, number,
                                                     done_count, expected.done_count));
  return {reward_sum / static_cast<double>(reward.numel()),
          static_cast<double>(done_count) / static_cast<double>(done.numel()), obs_hash};
}

void check_params(Verdicts& v, const TensorTree& received, std::int64_t version, int rank) {
  if (!received.contains("version") || !received.contains("policy.w") || !received.contains("policy.b")) {
    v.fail(format("rank %d: the broadcast parameter tree lacks version, policy.w or policy.b", rank));
    return;
  }
  const TensorTree params = received.to(Device::cpu());
  const Stamp stamp{rank, -1, version};
  check_leaf<std::int64_t>(v, stamp, params, "version", [&](std::uint64_t) { return version; });
  check_leaf<float>(v, stamp, params, "policy.w",
                    [&](std::uint64_t i) { return w_value(version, static_cast<std::int64_t>(i)); });
  check_leaf<float>(v, stamp, params, "policy.b",
                    [&](std::uint64_t i) { return b_value(version, static_cast<std::int64_t>(i)); });
}

}  // namespace actor_learner
