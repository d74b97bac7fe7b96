// NcclWork: the Work of the NCCL backend, complete once a CUDA event recorded behind its operation
// has been reached (see nccl_backend.hpp for the contract). It keeps the operation's tensors and
// the shared state alive until then.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/abandoned_operations.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "cuda/cuda_handles.hpp"
#include "transport/nccl/nccl_handles.hpp"
#include "transport/nccl/nccl_state.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/work.hpp"

namespace tensortree::detail {

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, CudaEvent done, std::vector<Tensor> tensors)
      : state_(std::move(state)), done_(std::move(done)), tensors_(std::move(tensors)) {}
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // An operation in flight is waited for up to the group's timeout (not at all once a wait timed
  // out or the communicator was aborted); past that its buffers are abandoned with it, since the
  // device may still use them (comm/abandoned_operations.hpp).
  ~NcclWork() override {
    if (reached_) return;
    if (!timed_out_ && !state_->aborted()) {
      try {
        block();
        return;
      } catch (...) {
        // The error was for a waiter to see; what is left is abandoned below.
      }
    }
    if (reached_) return;
    abandon_operation([state = state_, done = std::make_shared<CudaEvent>(std::move(done_)),
                       tensors = std::make_shared<std::vector<Tensor>>(std::move(tensors_))] {
      try {
        return event_reached(done->get());
      } catch (const Error&) {
        return true;  // the device failed the stream: nothing more will be written
      }
    });
  }

  cudaEvent_t done_event() const { return done_.get(); }

 protected:
  // Work::block() polls this, so a wait also notices NCCL's asynchronous errors, which a
  // cudaEventSynchronize on a kernel stuck waiting for a dead peer never would.
  bool test() override {
    if (reached_) return true;
    state_->check_async_error();
    reached_ = event_reached(done_.get());
    return reached_;
  }

  // Polled within the group's timeout: a kernel waiting for a dead peer never reaches the event.
  void block() override {
    try {
      wait_bounded([this] { return test(); }, state_->timeout(), [this] {
        return Timeout(fmt::format("{}: an NCCL operation did not complete within the group's timeout of {} ms "
                                   "(GroupOptions::timeout); it is still queued and may be waited for again, or "
                                   "Group::abort ends it", state_->where(), state_->timeout().count()));
      });
    } catch (const Timeout&) {
      timed_out_ = true;
      throw;
    }
  }

  void finish() override {
    tensors_.clear();  // the device is done with them
  }

  // The caller's stream waits for the event behind the operation; an error NCCL has already seen
  // is thrown here rather than left for a wait that may never come.
  bool queue_stream_wait(CudaStreamHandle stream) override {
    state_->check_async_error();
    TT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), done_.get(), 0));
    return true;
  }

 private:
  std::shared_ptr<NcclState> state_;
  CudaEvent done_;
  std::vector<Tensor> tensors_;
  bool reached_ = false;
  bool timed_out_ = false;
};

}  // namespace tensortree::detail
