// Fifo: the buffer as a queue shared by every process (Reverb's queue table: Fifo selector, each
// item sampled once). A shared read cursor in the control block hands out tickets in insertion
// order, n at a time, by compare-and-swap; tickets whose rows a later lap already overwrote are
// skipped. A handed-out row still being written by a live writer is waited for; one whose writer
// died (or never claimed it within kOwnerGrace) is skipped for the next ticket.
#include <algorithm>
#include <atomic>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/replay/row_writer.hpp"
#include "rl/replay/sampler.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

class FifoSampler final : public Sampler {
 public:
  void draw(const SamplerContext& context, std::int64_t n, std::vector<SampleUnit>& units) override {
    const std::uint64_t first = take(context, static_cast<std::uint64_t>(n));
    units.resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < units.size(); ++i) units[i] = unit_of(context, first + i);
    waiting_since_.reset();
  }

  SampleUnit redraw(const SamplerContext& context, const SampleUnit& failed) override {
    const std::uint64_t ticket = failed.first_seq / 2 - 1;
    const std::uint64_t seq = context.control.seq(failed.row).load(std::memory_order_acquire);
    if (!waiting_since_ || waiting_for_ != ticket) {
      waiting_since_ = WaitClock::now();
      waiting_for_ = ticket;
    }
    const bool being_written =
        seq == writing_seq(ticket) && holder_may_write(context.control, failed.row, seq, *waiting_since_);
    const bool not_yet_claimed = seq < writing_seq(ticket) && WaitClock::now() - *waiting_since_ < kOwnerGrace;
    if (being_written || not_yet_claimed) return failed;  // its writer is at work: the gather tries again
    return unit_of(context, take(context, 1));
  }

 private:
  static SampleUnit unit_of(const SamplerContext& context, std::uint64_t ticket) {
    const auto capacity = static_cast<std::uint64_t>(context.control.capacity());
    return {static_cast<std::int64_t>(ticket % capacity), 1, published_seq(ticket)};
  }

  // The next n tickets of the queue, once n are reserved past the read cursor.
  static std::uint64_t take(const SamplerContext& context, std::uint64_t n) {
    auto fifo = context.control.fifo_cursor();
    const auto capacity = static_cast<std::uint64_t>(context.control.capacity());
    std::uint64_t start = 0;
    const auto taken = [&] {
      std::uint64_t read = fifo.load(std::memory_order_acquire);
      const std::uint64_t inserted = context.control.cursor().load(std::memory_order_acquire);
      // Tickets a later lap overwrote are gone: the queue resumes at the oldest row present.
      start = std::max(read, inserted > capacity ? inserted - capacity : 0);
      return inserted >= start + n && fifo.compare_exchange_strong(read, start + n, std::memory_order_acq_rel);
    };
    if (!poll_until(taken, deadline_after(context.options.timeout))) {
      throw Timeout(fmt::format("ReplayBuffer::sample: the Fifo queue did not hold {} rows within {} ms ({} inserted, "
                                "read up to {})",
                                n, context.options.timeout.count(), context.control.cursor().load(),
                                context.control.fifo_cursor().load()));
    }
    return start;
  }

  std::optional<WaitClock::time_point> waiting_since_;
  std::uint64_t waiting_for_ = 0;
};

}  // namespace

std::unique_ptr<Sampler> make_fifo_sampler() { return std::make_unique<FifoSampler>(); }

}  // namespace tensortree::detail
