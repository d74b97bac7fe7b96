// Uniform with replacement, and without replacement (each handle walks a permutation of the rows,
// a pass; a batch that outlasts the pass is completed from the next one, as TorchRL's
// SamplerWithoutReplacement(drop_last=False), so every row is drawn once before any twice).
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
    units.resize(static_cast<std::size_t>(n));
    for (SampleUnit& unit : units) unit = next(context);
  }
  SampleUnit redraw(const SamplerContext& context, const SampleUnit&) override { return next(context); }

 private:
  // The next row of this pass; a new pass (a permutation of the rows present now) once it is spent.
  SampleUnit next(const SamplerContext& context) {
    if (next_ >= order_.size()) start_pass(context);
    if (order_.empty()) return {};  // no rows: the empty unit, as a draw from an empty buffer always was
    return {order_[next_++], 1, 0};
  }
  void start_pass(const SamplerContext& context) {
    order_.resize(static_cast<std::size_t>(context.size));
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
    std::shuffle(order_.begin(), order_.end(), context.rng);
    next_ = 0;
  }

  std::vector<std::int64_t> order_;
  std::size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Sampler> make_uniform_sampler() { return std::make_unique<UniformSampler>(); }
std::unique_ptr<Sampler> make_without_replacement_sampler() { return std::make_unique<WithoutReplacementSampler>(); }

}  // namespace tensortree::detail
