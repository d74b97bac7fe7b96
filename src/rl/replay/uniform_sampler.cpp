// Uniform with replacement, and without replacement (each handle draws a permutation of the rows
// and walks it; a new permutation once fewer than n are left, as TorchRL's drop_last).
#include <algorithm>
#include <numeric>

#include "rl/replay/sampler.hpp"

namespace tensortree::detail {

namespace {

class UniformSampler final : public Sampler {
 public:
  void draw(const SamplerContext& context, std::int64_t n, std::vector<SampleUnit>& units) override {
    units.resize(static_cast<std::size_t>(n));
    for (SampleUnit& unit : units) unit = {uniform_row(context.rng, context.size), 1, 0};
  }
  SampleUnit redraw(const SamplerContext& context, const SampleUnit&) override {
    return {uniform_row(context.rng, context.size), 1, 0};
  }
};

class WithoutReplacementSampler final : public Sampler {
 public:
  void draw(const SamplerContext& context, std::int64_t n, std::vector<SampleUnit>& units) override {
    refill_if_short(context, n);
    units.resize(static_cast<std::size_t>(n));
    for (SampleUnit& unit : units) unit = next();
  }
  SampleUnit redraw(const SamplerContext& context, const SampleUnit&) override {
    refill_if_short(context, 1);
    return next();
  }

 private:
  // A new epoch (a permutation of the rows present now) when fewer than `wanted` rows are left.
  void refill_if_short(const SamplerContext& context, std::int64_t wanted) {
    if (static_cast<std::int64_t>(order_.size() - next_) >= wanted) return;
    order_.resize(static_cast<std::size_t>(context.size));
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
    std::shuffle(order_.begin(), order_.end(), context.rng);
    next_ = 0;
  }
  SampleUnit next() { return next_ < order_.size() ? SampleUnit{order_[next_++], 1, 0} : SampleUnit{}; }

  std::vector<std::int64_t> order_;
  std::size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Sampler> make_uniform_sampler() { return std::make_unique<UniformSampler>(); }
std::unique_ptr<Sampler> make_without_replacement_sampler() { return std::make_unique<WithoutReplacementSampler>(); }

}  // namespace tensortree::detail
