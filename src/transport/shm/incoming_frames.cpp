#include "transport/shm/incoming_frames.hpp"

#include <algorithm>
#include <utility>

#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

std::shared_ptr<const IncomingFrames::Receive> IncomingFrames::expect(WorkPtr arrived, int peer, Deliver deliver,
                                                                       std::function<void()> explain_failure) {
  auto receive = std::make_shared<Receive>();
  receive->arrived_ = std::move(arrived);
  receive->source_ = peer;
  receive->deliver_ = std::move(deliver);
  receive->explain_failure_ = std::move(explain_failure);
  const std::lock_guard lock(mutex_);
  posted_.push_back(receive);
  return receive;
}

void IncomingFrames::progress() {
  const std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  // A receive from kAnySource matches its message only when polled: while an earlier one is still
  // waiting, a later one is not polled, or it could take the message meant for the earlier one.
  bool earlier_any_source_waits = false;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < posted_.size(); ++i) {
    const std::shared_ptr<Receive> receive = posted_[i].lock();
    if (!receive) continue;
    // A receive whose frame matched and whose payload is still coming no longer matches anything.
    const bool any_source = receive->source_ == kAnySource && !receive->continue_;
    if (!(any_source && earlier_any_source_waits) && settle_if_arrived(*receive)) continue;
    earlier_any_source_waits = earlier_any_source_waits || any_source;
    if (kept != i) posted_[kept] = std::move(posted_[i]);
    ++kept;
  }
  posted_.resize(kept);
}

bool IncomingFrames::waiting() {
  const std::lock_guard lock(mutex_);
  return std::any_of(posted_.begin(), posted_.end(), [](const std::weak_ptr<Receive>& posted) { return !posted.expired(); });
}

bool IncomingFrames::settle_if_arrived(Receive& receive) {
  try {
    if (receive.continue_) {
      if (!receive.continue_()) return false;
    } else {
      if (!receive.arrived_->is_completed()) return false;
      if (const std::exception_ptr failed = receive.arrived_->exception()) {
        if (receive.explain_failure_) receive.explain_failure_();
        std::rethrow_exception(failed);
      }
      if (receive.source_ == kAnySource) receive.source_ = receive.arrived_->source_rank();
      receive.arrived_.reset();  // the control backend's request and buffers go now, not with the Work
      Continuation rest = receive.deliver_(receive.source_);
      if (rest && !rest()) {
        receive.continue_ = std::move(rest);
        receive.delivering_.store(true, std::memory_order_release);
        return false;
      }
    }
  } catch (...) {
    receive.error_ = std::current_exception();
  }
  settle(receive);
  return true;
}

void IncomingFrames::settle(Receive& receive) {
  receive.arrived_.reset();
  receive.deliver_ = nullptr;
  receive.continue_ = nullptr;
  receive.explain_failure_ = nullptr;
  receive.settled_.store(true, std::memory_order_release);
  receive.delivering_.store(false, std::memory_order_release);
}

}  // namespace tensortree::detail
