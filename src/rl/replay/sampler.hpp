// How sample() picks rows: one small interface, one implementation per SamplerKind (TorchRL's
// Storage x Sampler split). A sampler proposes units (runs of consecutive rows); the gather copies
// them and asks for a replacement when a unit was unpublished or overwritten under the copy.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "rl/replay/control_block.hpp"
#include "rl/replay/row_store.hpp"
#include "tensortree/replay_buffer.hpp"

namespace tensortree::detail {

// `length` rows from `row` on (wrapping at the capacity). first_seq: the sequence number the
// first row must have (the rest follow it: consecutive tickets), 0 for "any published". A row of
// -1 is a unit the sampler could not find; the gather asks again.
struct SampleUnit {
  std::int64_t row = -1;
  std::int64_t length = 1;
  std::uint64_t first_seq = 0;
};

struct SamplerContext {
  const ControlBlock& control;
  const RowStore& store;
  std::mt19937_64& rng;
  const ReplayOpenOptions& options;
  std::int64_t size;  // rows holding data when the draw began
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Replaces `units` with units whose lengths sum to n.
  virtual void draw(const SamplerContext& context, std::int64_t n, std::vector<SampleUnit>& units) = 0;
  // Another unit of the same length, for one that could not be read.
  virtual SampleUnit redraw(const SamplerContext& context, const SampleUnit& failed) = 0;
  // Importance weights for the rows finally gathered; none (cleared) by default.
  virtual void weights(const SamplerContext& context, std::span<const std::int64_t> rows, std::vector<double>& out);
};

// InvalidArgument when the options do not fit the buffer (Prioritized on a buffer without
// priorities, Slice without a length).
std::unique_ptr<Sampler> make_sampler(const ReplayOpenOptions& options, const ControlBlock& control);

// A row in [0, size), each equally likely (Lemire's multiply-shift: no division, no modulo bias
// worth the name at these sizes).
__extension__ using WideProduct = unsigned __int128;  // the high half of a 64x64-bit product
inline std::int64_t uniform_row(std::mt19937_64& rng, std::int64_t size) {
  return static_cast<std::int64_t>((static_cast<WideProduct>(rng()) * static_cast<std::uint64_t>(size)) >> 64);
}

std::unique_ptr<Sampler> make_uniform_sampler();
std::unique_ptr<Sampler> make_prioritized_sampler();
std::unique_ptr<Sampler> make_slice_sampler();
std::unique_ptr<Sampler> make_without_replacement_sampler();
std::unique_ptr<Sampler> make_fifo_sampler();

}  // namespace tensortree::detail
