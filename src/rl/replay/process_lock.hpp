// Locks between processes that a dead holder cannot keep: a lock word holds the holder's identity
// (pid and start time, rl/process_identity.hpp), and a waiter that finds the holder gone (exited,
// a zombie, or its pid reused by a later process) takes the lock over instead of waiting for it.
// Every wait is bounded (Timeout naming what was awaited).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace tensortree::detail {

// Holds `word` (0 free, else the holder's rl::identity_word) for its lifetime.
class ProcessLock {
 public:
  // Throws Timeout naming `what` when a live holder keeps it past `timeout`.
  ProcessLock(std::uint64_t& word, std::chrono::milliseconds timeout, std::string_view what);
  ProcessLock(const ProcessLock&) = delete;
  ProcessLock& operator=(const ProcessLock&) = delete;
  ~ProcessLock();

  // True when the previous holder died holding it: what it guarded may be half-updated.
  bool recovered() const { return recovered_; }

 private:
  std::uint64_t& word_;
  bool recovered_ = false;
};

}  // namespace tensortree::detail
