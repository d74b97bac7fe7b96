#include "rl/process_identity.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

#include "core/text_format.hpp"

namespace tensortree::rl {

namespace {

// What /proc/<pid>/stat says of a process: its state letter ('Z' for a zombie) and start time.
struct ProcStat {
  char state = 0;
  std::uint64_t start = 0;
};

std::optional<ProcStat> read_proc_stat(std::uint32_t pid) {
  std::ifstream file(fmt::format("/proc/{}/stat", pid));
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // The command name in parentheses may hold anything, spaces and ')' included: fields 3 (state)
  // to 22 (start time) follow the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  ProcStat stat;
  fields >> stat.state;
  std::string skipped;
  for (int field = 4; field < 22; ++field) fields >> skipped;
  if (!(fields >> stat.start)) return std::nullopt;
  return stat;
}

// This process's identity word, 0 until looked up: every extend names its writer per row, so the
// lookup (a system call and a read of /proc) is made once per process.
std::atomic<std::uint64_t> cached_identity{0};
// A forked child must not keep its parent's.
[[maybe_unused]] const int reset_on_fork = ::pthread_atfork(nullptr, nullptr, [] { cached_identity.store(0); });

}  // namespace

ProcessIdentity this_process() {
  std::uint64_t word = cached_identity.load(std::memory_order_relaxed);
  if (word == 0) {
    const auto pid = static_cast<std::uint32_t>(::getpid());
    const std::optional<ProcStat> stat = read_proc_stat(pid);
    word = identity_word({pid, stat ? stat->start & kStartMask : 0});
    cached_identity.store(word, std::memory_order_relaxed);
  }
  return identity_of(word);
}

bool process_alive(const ProcessIdentity& holder) {
  if (holder.pid == 0) return false;
  if (holder.pid == static_cast<std::uint32_t>(::getpid())) {
    return holder.start == 0 || holder.start == this_process().start;
  }
  if (::kill(static_cast<pid_t>(holder.pid), 0) != 0 && errno != EPERM) return false;
  // Without /proc (here, or where the holder ran: start 0), the pid's existence is all there is.
  const std::optional<ProcStat> stat = read_proc_stat(holder.pid);
  if (!stat) return true;
  return stat->state != 'Z' && (holder.start == 0 || (stat->start & kStartMask) == holder.start);
}

}  // namespace tensortree::rl
