// Locks between processes that a dead holder cannot keep: a lock word holds the holder's pid, and
// a waiter that finds the holder gone takes the lock over instead of waiting for it. Every wait is
// bounded (Timeout naming what was awaited).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace tensortree::detail {

// True when process `pid` exists and has not exited (a zombie counts as gone). Non-positive pids
// (a garbage word) are never alive.
bool process_alive(std::int32_t pid);

// This process's pid, cached (fork() gives the child its own).
std::int32_t current_pid();

// Holds `word` (0 free, else the holder's pid) for its lifetime.
class ProcessLock {
 public:
  // Throws Timeout naming `what` when a live holder keeps it past `timeout`.
  ProcessLock(std::int32_t& word, std::chrono::milliseconds timeout, std::string_view what);
  ProcessLock(const ProcessLock&) = delete;
  ProcessLock& operator=(const ProcessLock&) = delete;
  ~ProcessLock();

  // True when the previous holder died holding it: what it guarded may be half-updated.
  bool recovered() const { return recovered_; }

 private:
  std::int32_t& word_;
  bool recovered_ = false;
};

}  // namespace tensortree::detail
