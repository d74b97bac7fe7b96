#include "rl/replay/row_gather.hpp"

#include <atomic>
#include <cstring>
#include <thread>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// Failed draws between two looks at the clock (and a yield, letting a writer finish its row).
constexpr int kDrawsPerCheck = 64;

}  // namespace

void RowGather::plan(const SamplerContext& context, const Schema& batch) {
  const RowLayout& layout = context.store.layout();
  plan_.resize(layout.leaf_count());
  for (std::size_t i = 0; i < plan_.size(); ++i) {
    plan_[i] = {context.store.base(i), layout.row_bytes(i), batch.leaves()[i].offset};
  }
}

void RowGather::copy_row(std::int64_t row, std::int64_t position, std::byte* dst) const {
  for (const LeafCopy& leaf : plan_) {
    std::memcpy(dst + leaf.offset + static_cast<std::uint64_t>(position) * leaf.row_bytes,
                leaf.source + static_cast<std::uint64_t>(row) * leaf.row_bytes, leaf.row_bytes);
  }
}

bool RowGather::try_copy(const SamplerContext& context, const SampleUnit& unit, std::int64_t position,
                         std::byte* dst) {
  const std::int64_t capacity = context.control.capacity();
  if (unit.row < 0 || unit.row >= capacity) return false;
  seqs_.resize(static_cast<std::size_t>(unit.length));
  for (std::int64_t j = 0; j < unit.length; ++j) {
    const std::uint64_t seq = context.control.seq((unit.row + j) % capacity).load(std::memory_order_acquire);
    const std::uint64_t expected = (j == 0 ? unit.first_seq : seqs_[0]) + 2 * static_cast<std::uint64_t>(j);
    if (!is_published(seq) || ((j > 0 || unit.first_seq != 0) && seq != expected)) return false;
    seqs_[static_cast<std::size_t>(j)] = seq;
  }
  for (std::int64_t j = 0; j < unit.length; ++j) copy_row((unit.row + j) % capacity, position + j, dst);
  // The copies above happen before the re-reads below (a seqlock reader's read barrier).
  std::atomic_thread_fence(std::memory_order_acquire);
  for (std::int64_t j = 0; j < unit.length; ++j) {
    if (context.control.seq((unit.row + j) % capacity).load(std::memory_order_relaxed) !=
        seqs_[static_cast<std::size_t>(j)]) {
      return false;
    }
  }
  return true;
}

void RowGather::gather(const SamplerContext& context, Sampler& sampler, std::vector<SampleUnit>& units,
                       const Schema& batch, std::byte* dst, std::vector<std::int64_t>& indices) {
  plan(context, batch);
  const auto deadline = deadline_after(context.options.timeout);
  const std::int64_t capacity = context.control.capacity();
  std::int64_t position = 0;
  indices.clear();
  for (SampleUnit& unit : units) {
    for (int failures = 1; !try_copy(context, unit, position, dst); ++failures) {
      if (failures % kDrawsPerCheck == 0) {
        if (deadline && WaitClock::now() >= *deadline) {
          throw Timeout(fmt::format("ReplayBuffer::sample: no readable row among {} draws in {} ms ({} rows present, "
                                    "the others unpublished or being written)",
                                    failures, context.options.timeout.count(), context.size));
        }
        std::this_thread::yield();
      }
      unit = sampler.redraw(context, unit);
    }
    for (std::int64_t j = 0; j < unit.length; ++j) indices.push_back((unit.row + j) % capacity);
    position += unit.length;
  }
}

}  // namespace tensortree::detail
