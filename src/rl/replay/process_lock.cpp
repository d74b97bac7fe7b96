#include "rl/replay/process_lock.hpp"

#include <atomic>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/process_identity.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

ProcessLock::ProcessLock(std::uint64_t& word, std::chrono::milliseconds timeout, std::string_view what)
    : word_(word) {
  const std::uint64_t self = rl::identity_word(rl::this_process());
  std::atomic_ref<std::uint64_t> lock(word_);
  const auto acquired = [&] {
    std::uint64_t holder = 0;
    if (lock.compare_exchange_strong(holder, self, std::memory_order_acquire)) return true;
    // A holder that died (or garbage in the word) is replaced; the caller repairs what it guarded.
    if (holder != self && (!rl::names_a_process(holder) || !rl::process_alive(rl::identity_of(holder))) &&
        lock.compare_exchange_strong(holder, self, std::memory_order_acquire)) {
      recovered_ = true;
      return true;
    }
    return false;
  };
  wait_bounded(acquired, timeout, [&] {
    return Timeout(fmt::format("{}: process {} held the lock for more than {} ms", what,
                               rl::identity_of(lock.load()).pid, timeout.count()));
  });
}

ProcessLock::~ProcessLock() { std::atomic_ref<std::uint64_t>(word_).store(0, std::memory_order_release); }

}  // namespace tensortree::detail
