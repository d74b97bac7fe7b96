#include "rl/replay/sampler.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

void Sampler::weights(const SamplerContext&, std::span<const std::int64_t>, std::vector<double>& out) { out.clear(); }

std::unique_ptr<Sampler> make_sampler(const ReplayOpenOptions& options, const ControlBlock& control) {
  switch (options.sampler) {
    case SamplerKind::Uniform:
      return make_uniform_sampler();
    case SamplerKind::Prioritized:
      if (control.tree_leaves() == 0) {
        throw InvalidArgument(fmt::format("ReplayBuffer: the Prioritized sampler needs priorities, and '{}' was "
                                          "created without priorities: create it with .prioritized = true "
                                          "(ReplayBufferOptions) or with the Prioritized sampler",
                                          control.file().parent_path().string()));
      }
      if (!(options.beta >= 0)) throw InvalidArgument(fmt::format("ReplayBuffer: beta {} is negative", options.beta));
      return make_prioritized_sampler();
    case SamplerKind::Slice:
      if (options.slice_length <= 0 || options.slice_length > control.capacity()) {
        throw InvalidArgument(fmt::format("ReplayBuffer: slice_length {} must be in 1..capacity ({})",
                                          options.slice_length, control.capacity()));
      }
      return make_slice_sampler();
    case SamplerKind::WithoutReplacement:
      return make_without_replacement_sampler();
    case SamplerKind::Fifo:
      return make_fifo_sampler();
  }
  throw InvalidArgument(fmt::format("ReplayBuffer: unknown sampler kind {}", static_cast<int>(options.sampler)));
}

}  // namespace tensortree::detail
