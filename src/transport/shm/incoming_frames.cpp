#include "transport/shm/incoming_frames.hpp"

#include <algorithm>
#include <utility>

#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

std::shared_ptr<const IncomingFrames::Receive> IncomingFrames::expect(WorkPtr arrived, int peer,
                                                                       std::function<void(int source)> deliver,
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
    const bool any_source = receive->source_ == kAnySource;
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
  if (!receive.arrived_->is_completed()) return false;
  try {
    if (const std::exception_ptr failed = receive.arrived_->exception()) {
      if (receive.explain_failure_) receive.explain_failure_();
      std::rethrow_exception(failed);
    }
    if (receive.source_ == kAnySource) receive.source_ = receive.arrived_->source_rank();
    receive.deliver_(receive.source_);
  } catch (...) {
    receive.error_ = std::current_exception();
  }
  receive.arrived_.reset();  // the control backend's request and buffers go now, not with the Work
  receive.deliver_ = nullptr;
  receive.explain_failure_ = nullptr;
  receive.settled_.store(true, std::memory_order_release);
  return true;
}

}  // namespace tensortree::detail
