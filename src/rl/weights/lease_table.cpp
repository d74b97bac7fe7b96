#include "rl/weights/lease_table.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>

#include "core/text_format.hpp"

namespace tensortree::rl {

namespace {

// The state letter of /proc/<pid>/stat ('Z' for a zombie), or 0 when it cannot be read.
char process_state(std::uint32_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // The command name in parentheses may hold anything, spaces and ')' included: the state follows
  // the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return 0;
  return text[close + 2];
}

}  // namespace

bool process_alive(std::uint32_t pid) {
  if (pid == 0) return false;
  if (pid == static_cast<std::uint32_t>(::getpid())) return true;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  return process_state(pid) != 'Z';
}

std::uint32_t LeaseTable::try_take(std::uint32_t slot, std::uint32_t pid, std::uint32_t start) const {
  const std::uint64_t lease = encode_lease(pid, slot);
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint32_t index = (start + i) % count_;
    std::atomic<std::uint64_t>& word = words_[index].value;
    std::uint64_t expected = 0;
    // seq_cst: the publisher's claim of the slot and this store are ordered one way or the other,
    // and the reader checks the claim after it (see WeightSubscriber::latest).
    if (word.load(std::memory_order_relaxed) == 0 && word.compare_exchange_strong(expected, lease)) return index;
  }
  return count_;
}

std::atomic<std::uint64_t>* LeaseTable::take(std::uint32_t slot, std::uint32_t pid, std::uint32_t& hint) const {
  std::uint32_t index = try_take(slot, pid, hint % count_);
  if (index == count_ && free_dead() > 0) index = try_take(slot, pid, hint % count_);
  if (index == count_) return nullptr;
  hint = index + 1;
  return &words_[index].value;
}

bool LeaseTable::free_if_dead(std::atomic<std::uint64_t>& word, std::uint64_t seen) {
  if (process_alive(lease_pid(seen))) return false;
  return word.compare_exchange_strong(seen, 0);
}

std::uint32_t LeaseTable::free_dead() const {
  std::uint32_t freed = 0;
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint64_t seen = words_[i].value.load();
    if (seen != 0 && free_if_dead(words_[i].value, seen)) ++freed;
  }
  return freed;
}

bool LeaseTable::pinned_by_live_reader(std::uint32_t slot) const {
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint64_t seen = words_[i].value.load();
    if (seen == 0 || lease_slot(seen) != slot) continue;
    if (!free_if_dead(words_[i].value, seen)) return true;
  }
  return false;
}

std::string LeaseTable::describe_holders() const {
  std::string out;
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint64_t seen = words_[i].value.load();
    if (seen == 0) continue;
    out += fmt::format("{}pid {} holds slot {}", out.empty() ? "" : ", ", lease_pid(seen), lease_slot(seen));
  }
  return out.empty() ? "no lease is held" : out;
}

}  // namespace tensortree::rl
