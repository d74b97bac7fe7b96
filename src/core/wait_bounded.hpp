// wait_bounded: the one polling wait behind every bounded blocking call (Work::wait(timeout), the
// MPI backend's waits). A transport whose native wait cannot be interrupted polls its test instead,
// so that a peer that never answers costs a Timeout, not a hung job.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

namespace tensortree::detail {

using WaitClock = std::chrono::steady_clock;

// A limit this long means "no limit" (milliseconds::max() among them): adding it to now could overflow.
inline constexpr std::chrono::milliseconds kUnbounded = std::chrono::hours(24 * 365 * 100);

// The deadline `limit` from now, or none for an unbounded limit.
inline std::optional<WaitClock::time_point> deadline_after(std::chrono::milliseconds limit) {
  if (limit >= kUnbounded) return std::nullopt;
  return WaitClock::now() + std::max(limit, std::chrono::milliseconds::zero());
}

// How a wait polls. Backoff: yields for the first millisecond (transfers, device copies and
// acknowledgements finish within it; a sleep there would add its own oversleeping, tens of
// microseconds each, to every transfer), then short sleeps, so that a long wait does not burn a core
// a progress thread may need. Spin: yields only,
// for transports that progress only inside their test call (MPI over TCP), where a sleep between
// tests would stall the transfer itself.
enum class WaitStyle : unsigned char { Backoff, Spin };

// Polls `done` until it returns true (then true) or `deadline` passes (then false).
template <class Done>
bool poll_until(Done&& done, std::optional<WaitClock::time_point> deadline, WaitStyle style = WaitStyle::Backoff) {
  constexpr auto kYieldingFor = std::chrono::milliseconds(1);
  constexpr auto kLongestSleep = std::chrono::microseconds(1000);
  auto pause_length = std::chrono::microseconds(10);
  const auto stop_yielding = WaitClock::now() + kYieldingFor;
  for (;;) {
    if (done()) return true;
    const auto now = WaitClock::now();
    if (deadline && now >= *deadline) return false;
    if (style == WaitStyle::Spin || now < stop_yielding) {
      std::this_thread::yield();
      continue;
    }
    auto pause = pause_length;
    if (deadline) pause = std::min(pause, std::chrono::duration_cast<std::chrono::microseconds>(*deadline - now));
    std::this_thread::sleep_for(pause);
    pause_length = std::min(pause_length * 2, kLongestSleep);
  }
}

// Polls `done` for at most `limit`; past it, throws what `timed_out()` returns (a Timeout whose
// message names the operation, the peer and the limit: only the caller knows them). The operation
// stays in flight: the caller may wait again, or drop it.
template <class Done, class TimedOut>
void wait_bounded(Done&& done, std::chrono::milliseconds limit, TimedOut&& timed_out,
                  WaitStyle style = WaitStyle::Backoff) {
  if (!poll_until(done, deadline_after(limit), style)) throw timed_out();
}

}  // namespace tensortree::detail
