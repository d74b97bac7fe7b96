// Claiming a row for writing. The owner (identity, then ticket) is stored just after the claim, so
// for a moment a claimed row's owner still names its previous writer: a waiter that sees another
// ticket there gives the new owner kOwnerGrace to record itself before taking over.
#include <atomic>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/process_identity.hpp"
#include "rl/replay/row_writer.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

bool holder_may_write(const ControlBlock& control, std::int64_t row, std::uint64_t seq,
                      WaitClock::time_point first_seen) {
  const std::uint64_t ticket = (seq - 1) / 2;
  if (control.owner_ticket(row).load(std::memory_order_acquire) != ticket + 1) {
    return WaitClock::now() - first_seen < kOwnerGrace;
  }
  const std::uint64_t owner = control.owner(row).load(std::memory_order_relaxed);
  return rl::names_a_process(owner) && rl::process_alive(rl::identity_of(owner));
}

namespace {

// Waits while the earlier lap's writer holding `row` under sequence number `held` may still be
// writing it; returns the row's sequence number once it changed, or `held` once the holder is gone.
std::uint64_t wait_for_holder(const ControlBlock& control, std::int64_t row, std::uint64_t held,
                              std::chrono::milliseconds timeout) {
  const auto first_seen = WaitClock::now();
  std::uint64_t seq = held;
  int polls = 0;
  const auto done = [&] {
    seq = control.seq(row).load(std::memory_order_acquire);
    if (seq != held) return true;
    // The liveness check costs system calls: made on the first poll and every 64th after it.
    return polls++ % 64 == 0 && !holder_may_write(control, row, held, first_seen);
  };
  wait_bounded(done, timeout, [&] {
    return Timeout(fmt::format("ReplayBuffer::extend: row {} is still being written by process {} after {} ms", row,
                               rl::identity_of(control.owner(row).load()).pid, timeout.count()));
  });
  return seq;
}

}  // namespace

bool claim_row(const ControlBlock& control, std::uint64_t ticket, std::chrono::milliseconds timeout) {
  const auto row = static_cast<std::int64_t>(ticket % static_cast<std::uint64_t>(control.capacity()));
  auto seq = control.seq(row);
  const std::uint64_t mine = writing_seq(ticket);
  std::uint64_t current = seq.load(std::memory_order_acquire);
  for (;;) {
    if (current >= mine) return false;  // a later lap has the row
    if (current % 2 == 1) {             // an earlier lap's writer is inside it
      const std::uint64_t after = wait_for_holder(control, row, current, timeout);
      if (after != current) {
        current = after;
        continue;
      }
    }
    if (seq.compare_exchange_weak(current, mine, std::memory_order_acq_rel, std::memory_order_acquire)) break;
  }
  control.owner(row).store(rl::identity_word(rl::this_process()), std::memory_order_relaxed);
  control.owner_ticket(row).store(ticket + 1, std::memory_order_release);
  return true;
}

}  // namespace tensortree::detail
