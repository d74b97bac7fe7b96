// IncomingFrames: the frame receives a NodeLocalBackend has posted, each settled (its payload
// copied out and acknowledged) by the first poll of any of the backend's Works that finds its frame
// arrived, not only by a wait on its own Work. A sender's Work may wait for that acknowledgement:
// two ranks that each wait on their sends before their receives would otherwise wait for each
// other forever, where MPI's progress engine completes posted receives the same way. A receive
// whose Work is dropped unsettled is cancelled, as MPI's is. A delivery that must wait for its
// sender (a streamed payload) goes on over later polls instead of holding up the others: one
// sender that stops writing delays only its own receive. Thread-safe.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tensortree/work.hpp"

namespace tensortree::detail {

class IncomingFrames {
 public:
  // What a delivery leaves to do: null when it is done, else a step that every later poll runs
  // until it returns true (done); what it throws fails the receive.
  using Continuation = std::function<bool()>;
  using Deliver = std::function<Continuation(int source)>;

  // One posted receive, shared by IncomingFrames and the Work that reports it.
  class Receive {
   public:
    bool settled() const { return settled_.load(std::memory_order_acquire); }
    // The sender (known once settled); the error, if the receive or its delivery failed.
    int source() const { return source_; }
    std::exception_ptr error() const { return error_; }
    // Whether its frame arrived and its payload is still being taken (a stream).
    bool delivering() const { return delivering_.load(std::memory_order_acquire); }

   private:
    friend class IncomingFrames;
    WorkPtr arrived_;
    int source_ = -1;
    Deliver deliver_;
    Continuation continue_;  // set while a delivery goes on over polls
    std::function<void()> explain_failure_;
    std::exception_ptr error_;
    std::atomic<bool> settled_{false};
    std::atomic<bool> delivering_{false};
  };

  // Records a receive posted on the control backend (`arrived`) from `peer` (kAnySource: the
  // matched receive says who sent). Once it completes, `deliver` takes the frame from its sender;
  // if it failed, `explain_failure` may raise a better error than the receive's own. The caller
  // owns the record: once it lets go, the receive is forgotten (and `arrived` cancelled).
  std::shared_ptr<const Receive> expect(WorkPtr arrived, int peer, Deliver deliver,
                                        std::function<void()> explain_failure);
  // Settles every recorded receive whose frame has arrived, in the order they were posted (receives
  // from kAnySource match in that order too); returns at once if another thread is doing it.
  void progress();
  // Whether any receive is recorded and not yet settled (or forgotten).
  bool waiting();

 private:
  // Whether `receive` is settled now (delivered, or failed).
  static bool settle_if_arrived(Receive& receive);
  static void settle(Receive& receive);

  std::mutex mutex_;
  std::vector<std::weak_ptr<Receive>> posted_;
};

}  // namespace tensortree::detail
