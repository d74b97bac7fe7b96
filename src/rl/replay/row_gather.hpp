// The reading half of the per-row seqlock: the sampler's units are copied straight into the
// sampled batch's consolidated buffer, one memcpy per leaf and row from a plan made once per
// batch layout, and each unit's sequence numbers are checked before and after its copy. A unit
// that was unpublished, torn or overwritten is replaced by another draw, until the deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "rl/replay/sampler.hpp"
#include "tensortree/schema.hpp"

namespace tensortree::detail {

class RowGather {
 public:
  // Fills `dst` (laid out by `batch`, n rows) and `indices` (n storage rows). Timeout when no
  // readable unit turns up within the handle's timeout.
  void gather(const SamplerContext& context, Sampler& sampler, std::vector<SampleUnit>& units, const Schema& batch,
              std::byte* dst, std::vector<std::int64_t>& indices);

 private:
  struct LeafCopy {
    const std::byte* source;
    std::uint64_t row_bytes;
    std::uint64_t offset;  // in the batch buffer
  };
  // One entry per leaf (reused: a sample allocates nothing here once the plan has its size).
  void plan(const SamplerContext& context, const Schema& batch);
  // Copies `unit` to batch rows position..; false when it could not be read whole.
  bool try_copy(const SamplerContext& context, const SampleUnit& unit, std::int64_t position, std::byte* dst);
  void copy_row(std::int64_t row, std::int64_t position, std::byte* dst) const;

  std::vector<LeafCopy> plan_;
  std::vector<std::uint64_t> seqs_;
};

}  // namespace tensortree::detail
