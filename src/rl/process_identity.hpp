// Who holds something in a shared control block (a replay row or lock, a weight lease): a process
// named by its pid and its start time, so that a pid the kernel has given to a later process is
// not taken for the holder. One liveness check for replay and weights alike.
#pragma once

#include <cstdint>

namespace tensortree::rl {

struct ProcessIdentity {
  std::uint32_t pid = 0;    // below 2^22, Linux's PID_MAX_LIMIT
  std::uint64_t start = 0;  // low 34 bits of the start time in clock ticks; 0 where /proc is absent
};
inline constexpr std::uint64_t kStartMask = (std::uint64_t{1} << 34) - 1;
inline constexpr std::uint64_t kPidMask = (std::uint64_t{1} << 22) - 1;

// This process (looked up again after a fork).
ProcessIdentity this_process();

// Whether `holder` still runs: its pid exists, is not a zombie (it will never release anything)
// and started when recorded (else the pid was reused by another process). Pid 0 never runs.
bool process_alive(const ProcessIdentity& holder);

// An identity in one word (start << 22 | pid, 56 bits): 0 for none, and a word with any of its top
// 8 bits set names no process.
inline std::uint64_t identity_word(const ProcessIdentity& id) {
  return (id.start & kStartMask) << 22 | (id.pid & kPidMask);
}
inline ProcessIdentity identity_of(std::uint64_t word) {
  return {static_cast<std::uint32_t>(word & kPidMask), (word >> 22) & kStartMask};
}
inline bool names_a_process(std::uint64_t word) { return word >> 56 == 0; }

}  // namespace tensortree::rl
