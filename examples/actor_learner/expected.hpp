// What every tree of the job must hold, derived from what names it alone, so that the receiver can
// check every element without a side channel. A trajectory's elements derive from (seed, actor,
// sequence number, leaf, element index) and its meta/ leaves carry the actor, sequence number and
// parameter version (the Stamp); meta/obs_xxh3 holds the XXH3 of each obs row. The parameters of
// version v derive from v.
#pragma once

#include <cstddef>
#include <cstdint>

#include "job.hpp"
#include "tensortree/tensortree.hpp"

namespace actor_learner {

// Who wrote a trajectory, which one it is, and the parameters it was acted with.
struct Stamp {
  std::int64_t actor;
  std::int64_t seq;
  std::int64_t version;
};

enum class Key { Obs, NextObs, Action, Reward, Done, EpisodeReturn, EpisodeLen };

// The per-trajectory, per-leaf base every element of that leaf derives from.
std::uint64_t base_of(std::uint64_t seed, const Stamp& stamp, Key key);

// Element i of each generated leaf. Observations vary with i inside a row and with the base between
// trajectories; floats are multiples of 1/64 (exact, so sums are exact in double too).
inline std::uint8_t obs_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<std::uint8_t>(static_cast<std::uint8_t>((i * 7) ^ (i >> 9)) + static_cast<std::uint8_t>(base));
}
inline std::int64_t action_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<std::int64_t>((base + i) % 18);
}
inline float reward_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<float>(static_cast<std::int64_t>(((base >> 8) + i * 31) % 2001) - 1000) / 64.0f;
}
inline bool done_value(std::uint64_t base, std::uint64_t i) { return ((base >> 16) + i) % 11 == 0; }
inline float episode_return_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<float>(((base >> 24) + i * 13) % 4001) * 0.25f;
}
inline std::int64_t episode_len_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<std::int64_t>(((base >> 32) + i) % 1000) + 1;
}

std::size_t obs_row_bytes(const Options& o);
std::uint64_t row_hash(const std::uint8_t* row, std::size_t bytes, std::uint64_t seed);

// Acting, in this example: writing the trajectory a stamp names into a tree, in place (a consolidated
// tree stays consolidated). The values are computed on the CPU; a tree elsewhere gets them through a
// host tree of the same layout, leaf by leaf. With --corrupt-seq, actor 1 then flips one obs byte
// of that trajectory, after the checksums were taken, to show that the learner notices.
class TrajectoryWriter {
 public:
  // `like`: a tree of the layout to write.
  TrajectoryWriter(const Options& o, const tensortree::TensorTree& like);

  void write(const tensortree::TensorTree& tree, const Stamp& stamp) const;

 private:
  const Options& o_;
  tensortree::TensorTree host_;
};

// The parameters: policy/{w [64, 64], b [64]} float32 and version int64.
float w_value(std::int64_t version, std::int64_t i);
float b_value(std::int64_t version, std::int64_t i);
tensortree::TensorTree make_params(std::int64_t version, tensortree::Device device);

}  // namespace actor_learner
