// AbortSignal: raised once, with a reason, when a group is aborted on this rank; the waits of the
// operations it started poll it, so that a thread blocked on a peer that will never answer is
// released with an error instead of waiting out its timeout.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

class AbortSignal {
 public:
  // The first reason is kept; later calls change nothing.
  void raise(const std::string& reason) {
    const std::lock_guard lock(mutex_);
    if (raised_.load(std::memory_order_relaxed)) return;
    reason_ = reason;
    raised_.store(true, std::memory_order_release);
  }

  // One atomic load: cheap enough for every poll of a wait.
  bool raised() const { return raised_.load(std::memory_order_acquire); }

  std::string reason() const {
    const std::lock_guard lock(mutex_);
    return reason_;
  }

  // Once raised, BackendError naming `what()` (called only then: building the name costs) and the
  // reason.
  template <class What>
  void throw_if_raised(What&& what) const {
    if (raised()) throw BackendError(fmt::format("{} was aborted: {} (Group::abort); the group is unusable", what(),
                                                 reason()));
  }

 private:
  std::atomic<bool> raised_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

}  // namespace tensortree::detail
