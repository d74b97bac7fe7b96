#include "rl/process_identity.hpp"

#include <signal.h>
#include <unistd.h>

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

}  // namespace

ProcessIdentity this_process() {
  thread_local ProcessIdentity cached;
  const auto pid = static_cast<std::uint32_t>(::getpid());
  if (cached.pid != pid) {
    const std::optional<ProcStat> stat = read_proc_stat(pid);
    cached = {pid, stat ? stat->start & kStartMask : 0};
  }
  return cached;
}

bool process_alive(const ProcessIdentity& holder) {
  if (holder.pid == 0) return false;
  if (holder.pid == static_cast<std::uint32_t>(::getpid())) return holder.start == 0 || holder.start == this_process().start;
  if (::kill(static_cast<pid_t>(holder.pid), 0) != 0 && errno != EPERM) return false;
  // Without /proc (here, or where the holder ran: start 0), the pid's existence is all there is.
  const std::optional<ProcStat> stat = read_proc_stat(holder.pid);
  if (!stat) return true;
  return stat->state != 'Z' && (holder.start == 0 || (stat->start & kStartMask) == holder.start);
}

}  // namespace tensortree::rl
