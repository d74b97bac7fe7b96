// Claiming a row for writing. The owner tag (pid and low ticket bits) is stored just after the
// claim, so for a moment a claimed row's tag still names its previous writer: a waiter that sees a
// tag from another ticket gives the new owner kOwnerGrace to record itself before taking over.
#include <atomic>
#include <thread>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/replay/process_lock.hpp"
#include "rl/replay/row_writer.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

std::uint64_t owner_tag(std::int32_t pid, std::uint64_t ticket) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32) | (ticket & 0xffffffffU);
}

}  // namespace

bool holder_may_write(std::uint64_t seq, std::uint64_t tag, WaitClock::time_point first_seen) {
  const std::uint64_t ticket = (seq - 1) / 2;
  if ((tag & 0xffffffffU) != (ticket & 0xffffffffU)) return WaitClock::now() - first_seen < kOwnerGrace;
  return process_alive(static_cast<std::int32_t>(tag >> 32));
}

bool claim_row(const ControlBlock& control, std::uint64_t ticket, std::chrono::milliseconds timeout) {
  const auto row = static_cast<std::int64_t>(ticket % static_cast<std::uint64_t>(control.capacity()));
  auto seq = control.seq(row);
  const std::uint64_t mine = writing_seq(ticket);
  std::uint64_t current = seq.load(std::memory_order_acquire);
  std::optional<WaitClock::time_point> deadline;
  WaitClock::time_point first_seen{};
  std::uint64_t waited_on = 0;
  for (;;) {
    if (current >= mine) return false;  // a later lap has the row
    if (current % 2 == 1) {             // an earlier lap's writer is inside it
      if (current != waited_on) {
        waited_on = current;
        first_seen = WaitClock::now();
        deadline = deadline_after(timeout);
      }
      if (holder_may_write(current, control.owner(row).load(std::memory_order_acquire), first_seen)) {
        if (deadline && WaitClock::now() >= *deadline) {
          throw Timeout(fmt::format("ReplayBuffer::extend: row {} is still being written by process {} after {} ms",
                                    row, control.owner(row).load() >> 32, timeout.count()));
        }
        std::this_thread::yield();
        current = seq.load(std::memory_order_acquire);
        continue;
      }
    }
    if (seq.compare_exchange_weak(current, mine, std::memory_order_acq_rel, std::memory_order_acquire)) break;
  }
  control.owner(row).store(owner_tag(current_pid(), ticket), std::memory_order_release);
  return true;
}

}  // namespace tensortree::detail
