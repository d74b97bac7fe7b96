#include "expected.hpp"

#include <xxhash.h>

#include <algorithm>

namespace actor_learner {

using tensortree::Device;
using tensortree::DType;
using tensortree::Shape;
using tensortree::Tensor;
using tensortree::TensorTree;

namespace {

constexpr std::int64_t kHidden = 64;

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Writes Value(base, i) into each element i of a leaf (a template argument, so that the loop inlines it).
template <auto Value>
void fill_leaf(const TensorTree& tree, const char* path, std::uint64_t base) {
  using T = decltype(Value(0, 0));
  const Tensor& leaf = tree.get(path);
  T* p = leaf.data<T>();
  const auto count = static_cast<std::uint64_t>(leaf.numel());
  for (std::uint64_t i = 0; i < count; ++i) p[i] = Value(base, i);
}

void fill_trajectory(const TensorTree& tree, const Options& o, const Stamp& stamp) {
  const auto b = [&](Key key) { return base_of(o.seed, stamp, key); };
  fill_leaf<obs_value>(tree, "obs", b(Key::Obs));
  fill_leaf<obs_value>(tree, "next.obs", b(Key::NextObs));
  fill_leaf<action_value>(tree, "action", b(Key::Action));
  fill_leaf<reward_value>(tree, "reward", b(Key::Reward));
  fill_leaf<done_value>(tree, "done", b(Key::Done));
  fill_leaf<episode_return_value>(tree, "info.episode_return", b(Key::EpisodeReturn));
  fill_leaf<episode_len_value>(tree, "info.episode_len", b(Key::EpisodeLen));

  const auto n = static_cast<std::size_t>(o.T * o.B);
  std::fill_n(tree.get("meta.actor").data<std::int64_t>(), n, stamp.actor);
  std::fill_n(tree.get("meta.seq").data<std::int64_t>(), n, stamp.seq);
  std::fill_n(tree.get("meta.version").data<std::int64_t>(), n, stamp.version);
  const auto* obs = tree.get("obs").data<std::uint8_t>();
  auto* hashes = tree.get("meta.obs_xxh3").data<std::uint64_t>();
  const std::size_t row = obs_row_bytes(o);
  for (std::size_t r = 0; r < n; ++r) hashes[r] = row_hash(obs + r * row, row, o.seed);
}

void damage_trajectory(const TensorTree& tree) {
  const Tensor& obs = tree.get("obs");
  obs.data<std::uint8_t>()[obs.numel() / 2] ^= 0x5A;
}

}  // namespace

std::uint64_t base_of(std::uint64_t seed, const Stamp& stamp, Key key) {
  std::uint64_t h = splitmix(seed ^ 0x5EEDull);
  h = splitmix(h ^ static_cast<std::uint64_t>(stamp.actor));
  h = splitmix(h ^ static_cast<std::uint64_t>(stamp.seq));
  return splitmix(h ^ static_cast<std::uint64_t>(key));
}

std::size_t obs_row_bytes(const Options& o) { return static_cast<std::size_t>(3 * o.height * o.width); }

std::uint64_t row_hash(const std::uint8_t* row, std::size_t bytes, std::uint64_t seed) {
  return XXH3_64bits_withSeed(row, bytes, seed);
}

TrajectoryWriter::TrajectoryWriter(const Options& o, const TensorTree& like) : o_(o), host_(like.to(Device::cpu())) {}

void TrajectoryWriter::write(const TensorTree& tree, const Stamp& stamp) const {
  const bool on_host = tree.device() == Device::cpu();
  const TensorTree& target = on_host ? tree : host_;
  fill_trajectory(target, o_, stamp);
  if (stamp.actor == 1 && stamp.seq == o_.corrupt_seq) damage_trajectory(target);
  if (on_host) return;
  host_.for_each_leaf([&](const tensortree::Path& path, const Tensor& leaf) { tree.get(path).copy_(leaf); });
}

float w_value(std::int64_t version, std::int64_t i) {
  return static_cast<float>(version) + static_cast<float>(i % 1000) / 8.0f;
}
float b_value(std::int64_t version, std::int64_t i) {
  return -static_cast<float>(version) - static_cast<float>(i) / 4.0f;
}

TensorTree make_params(std::int64_t version, Device device) {
  Tensor w = Tensor::empty({kHidden, kHidden}, {DType::Float32});
  Tensor b = Tensor::empty({kHidden}, {DType::Float32});
  for (std::int64_t i = 0; i < kHidden * kHidden; ++i) w.data<float>()[i] = w_value(version, i);
  for (std::int64_t i = 0; i < kHidden; ++i) b.data<float>()[i] = b_value(version, i);
  TensorTree params(Shape{});
  params.set("policy.w", w.to(device));
  params.set("policy.b", b.to(device));
  params.set("version", Tensor::full({}, static_cast<double>(version), {DType::Int64}).to(device));
  return params;
}

}  // namespace actor_learner
