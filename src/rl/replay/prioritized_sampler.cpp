// Prioritized (TorchRL's PrioritizedSampler): row i with probability p_i / sum_k p_k, where the
// stored p_i is (priority + eps)^alpha; importance weights (p_i / min_k p_k)^-beta. Draws read the
// shared sum tree under its lock.
#include <algorithm>
#include <cmath>

#include "rl/replay/priority_trees.hpp"
#include "rl/replay/sampler.hpp"

namespace tensortree::detail {

namespace {

class PrioritizedSampler final : public Sampler {
 public:
  void draw(const SamplerContext& context, std::int64_t n, std::vector<SampleUnit>& units) override {
    units.resize(static_cast<std::size_t>(n));
    masses_.resize(units.size());
    rows_.resize(units.size());
    const PriorityTrees trees(context.control, context.options.timeout);
    const double total = trees.total();
    if (!(total > 0) || !std::isfinite(total)) {
      std::fill(units.begin(), units.end(), SampleUnit{});
      return;
    }
    std::uniform_real_distribution<double> mass(0.0, total);
    for (double& m : masses_) m = mass(context.rng);
    trees.find_all(masses_, rows_);
    for (std::size_t i = 0; i < units.size(); ++i) units[i] = {rows_[i], 1, 0};
  }

  SampleUnit redraw(const SamplerContext& context, const SampleUnit&) override {
    const PriorityTrees trees(context.control, context.options.timeout);
    return draw_one(context, trees);
  }

  void weights(const SamplerContext& context, std::span<const std::int64_t> rows, std::vector<double>& out) override {
    const PriorityTrees trees(context.control, context.options.timeout);
    const double min = trees.min();
    out.resize(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double p = trees.leaf(rows[i]);
      // A row re-prioritized or overwritten since the draw keeps a defined weight.
      out[i] = p > 0 && min > 0 ? std::pow(p / min, -context.options.beta) : 1.0;
    }
  }

 private:
  SampleUnit draw_one(const SamplerContext& context, const PriorityTrees& trees) {
    const double total = trees.total();
    if (!(total > 0) || !std::isfinite(total)) return {};
    const double mass = std::uniform_real_distribution<double>(0.0, total)(context.rng);
    return {trees.find(mass), 1, 0};
  }

  std::vector<double> masses_;
  std::vector<std::int64_t> rows_;
};

}  // namespace

std::unique_ptr<Sampler> make_prioritized_sampler() { return std::make_unique<PrioritizedSampler>(); }

}  // namespace tensortree::detail
