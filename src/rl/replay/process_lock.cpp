#include "rl/replay/process_lock.hpp"

#include <signal.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// A zombie still answers kill(pid, 0); its state letter in /proc/<pid>/stat is 'Z'.
bool is_zombie(std::int32_t pid) {
  char name[64];
  std::snprintf(name, sizeof name, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(name, "re");
  if (f == nullptr) return false;
  char line[512] = {};
  const std::size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  // "pid (comm) S ...": the state follows the last ')' (comm may hold parentheses).
  for (std::size_t i = n; i > 0; --i) {
    if (line[i - 1] == ')') return i + 1 < n && line[i + 1] == 'Z';
  }
  return false;
}

std::atomic<std::int32_t> cached_pid{0};

}  // namespace

bool process_alive(std::int32_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  return !is_zombie(pid);
}

std::int32_t current_pid() {
  // getpid() is cheap but not free on every libc; fork() children reset the cache (see below).
  std::int32_t pid = cached_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<std::int32_t>(::getpid());
    cached_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

namespace {
// A forked child must not keep its parent's pid.
[[maybe_unused]] const int reset_on_fork = ::pthread_atfork(nullptr, nullptr, [] { cached_pid.store(0); });
}  // namespace

ProcessLock::ProcessLock(std::int32_t& word, std::chrono::milliseconds timeout, std::string_view what)
    : word_(word) {
  const std::int32_t self = current_pid();
  std::atomic_ref<std::int32_t> lock(word_);
  const auto acquired = [&] {
    std::int32_t holder = 0;
    if (lock.compare_exchange_strong(holder, self, std::memory_order_acquire)) return true;
    // A holder that died (or garbage in the word) is replaced; the caller repairs what it guarded.
    if (holder != self && !process_alive(holder) &&
        lock.compare_exchange_strong(holder, self, std::memory_order_acquire)) {
      recovered_ = true;
      return true;
    }
    return false;
  };
  wait_bounded(acquired, timeout, [&] {
    return Timeout(fmt::format("{}: process {} held the lock for more than {} ms", what, lock.load(),
                               timeout.count()));
  });
}

ProcessLock::~ProcessLock() { std::atomic_ref<std::int32_t>(word_).store(0, std::memory_order_release); }

}  // namespace tensortree::detail
