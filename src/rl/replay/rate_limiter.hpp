// Reverb's rate limiter over the control block's shared counters: the insert cursor and the
// sample count. A side that is ahead waits (bounded) for the other; each reservation is one
// compare-and-swap of its counter, made only when the limits allow it, so concurrent callers
// never overshoot together.
#pragma once

#include <chrono>
#include <cstdint>

#include "rl/replay/control_block.hpp"

namespace tensortree::detail {

// Whether k more inserts / n more samples are allowed, given the counters now.
bool can_insert(const RateLimiterOptions& limits, std::uint64_t inserts, std::uint64_t samples, std::uint64_t k);
bool can_sample(const RateLimiterOptions& limits, std::uint64_t inserts, std::uint64_t samples, std::uint64_t n);

// Reserves k insert tickets once the limiter allows them; returns the first. Timeout when it does
// not within `timeout`.
std::uint64_t reserve_inserts(const ControlBlock& control, std::uint64_t k, std::chrono::milliseconds timeout);
// Counts n samples once the limiter allows them (Timeout when it does not within `timeout`), and
// takes them back when destroyed uncommitted: a sample that fails after its reservation (a copy
// that timed out) is not counted, and leaves its allowance to other samplers.
class SampleReservation {
 public:
  SampleReservation(const ControlBlock& control, std::uint64_t n, std::chrono::milliseconds timeout);
  SampleReservation(const SampleReservation&) = delete;
  SampleReservation& operator=(const SampleReservation&) = delete;
  ~SampleReservation();
  // The sample was returned: the count stays.
  void commit() { committed_ = true; }

 private:
  const ControlBlock& control_;
  std::uint64_t n_;
  bool committed_ = false;
};

}  // namespace tensortree::detail
