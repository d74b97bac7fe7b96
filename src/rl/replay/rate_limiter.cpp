#include "rl/replay/rate_limiter.hpp"

#include <atomic>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

double diff(const RateLimiterOptions& limits, std::uint64_t inserts, std::uint64_t samples) {
  return static_cast<double>(inserts) * limits.samples_per_insert - static_cast<double>(samples);
}

bool unlimited(const RateLimiterOptions& limits) {
  return limits.min_size_to_sample == 0 && limits.min_diff == -std::numeric_limits<double>::infinity() &&
         limits.max_diff == std::numeric_limits<double>::infinity();
}

[[noreturn]] void timed_out(const ControlBlock& control, const char* side, std::uint64_t rows,
                            std::chrono::milliseconds timeout) {
  throw Timeout(fmt::format("ReplayBuffer rate limiter: {} of {} rows waited {} ms ({} rows inserted, {} sampled; "
                            "samples_per_insert {}, diff {}..{}, min size {})",
                            side, rows, timeout.count(), control.cursor().load(), control.samples().load(),
                            control.limits().samples_per_insert, control.limits().min_diff, control.limits().max_diff,
                            control.limits().min_size_to_sample));
}

// A counter that a damaged control block set near 2^64 would wrap: refused, never wrapped.
void check_room(const ControlBlock& control, const char* counter, std::uint64_t value, std::uint64_t add) {
  if (value > kMaxTickets || add > kMaxTickets - value) {
    throw CorruptData(fmt::format("replay control block '{}' has {} {}: {} more would pass {} (damaged?)",
                                  control.file().string(), counter, value, add, kMaxTickets));
  }
}

// Retries `reserve` (a check and one compare-and-swap) until it succeeds: at once when only a race
// with another process can fail it (no limits), else until the limiter allows it, within `timeout`.
template <class Reserve>
bool reserved_within(const ControlBlock& control, Reserve&& reserve, std::chrono::milliseconds timeout) {
  if (!unlimited(control.limits())) return poll_until(reserve, deadline_after(timeout));
  while (!reserve()) {
  }
  return true;
}

}  // namespace

bool can_insert(const RateLimiterOptions& limits, std::uint64_t inserts, std::uint64_t samples, std::uint64_t k) {
  if (inserts + k < static_cast<std::uint64_t>(limits.min_size_to_sample)) return true;
  return diff(limits, inserts + k, samples) <= limits.max_diff;
}

bool can_sample(const RateLimiterOptions& limits, std::uint64_t inserts, std::uint64_t samples, std::uint64_t n) {
  return inserts >= static_cast<std::uint64_t>(limits.min_size_to_sample) &&
         diff(limits, inserts, samples + n) >= limits.min_diff;
}

std::uint64_t reserve_inserts(const ControlBlock& control, std::uint64_t k, std::chrono::milliseconds timeout) {
  auto cursor = control.cursor();
  std::uint64_t first = 0;
  const auto reserved = [&] {
    first = cursor.load(std::memory_order_acquire);
    check_room(control, "insert cursor", first, k);
    return can_insert(control.limits(), first, control.samples().load(std::memory_order_acquire), k) &&
           cursor.compare_exchange_strong(first, first + k, std::memory_order_acq_rel);
  };
  if (!reserved_within(control, reserved, timeout)) timed_out(control, "an extend", k, timeout);
  return first;
}

SampleReservation::SampleReservation(const ControlBlock& control, std::uint64_t n, std::chrono::milliseconds timeout)
    : control_(control), n_(n) {
  auto samples = control.samples();
  const auto reserved = [&] {
    std::uint64_t count = samples.load(std::memory_order_acquire);
    check_room(control, "sample count", count, n);
    return can_sample(control.limits(), control.cursor().load(std::memory_order_acquire), count, n) &&
           samples.compare_exchange_strong(count, count + n, std::memory_order_acq_rel);
  };
  if (!reserved_within(control, reserved, timeout)) timed_out(control, "a sample", n, timeout);
}

SampleReservation::~SampleReservation() {
  if (!committed_) control_.samples().fetch_sub(n_, std::memory_order_acq_rel);
}

}  // namespace tensortree::detail
