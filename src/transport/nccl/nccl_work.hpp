// NcclWork: the Work of the NCCL backend, complete once a CUDA event recorded behind its operation
// has been reached (see nccl_backend.hpp for the contract). It keeps the operation's tensors and
// the shared state alive until then.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <utility>
#include <vector>

#include "transport/nccl/nccl_handles.hpp"
#include "transport/nccl/nccl_state.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/work.hpp"

namespace tensortree::detail {

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, CudaEvent done, std::vector<Tensor> tensors)
      : state_(std::move(state)), done_(std::move(done)), tensors_(std::move(tensors)) {}
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // Work's contract: an operation in flight is waited for, since the device still uses its buffers.
  ~NcclWork() override {
    if (reached_) return;
    try {
      block();
    } catch (...) {
      // The error was for a waiter to see. After an abort NCCL's kernels exit, so this returns.
      cudaEventSynchronize(done_.get());
    }
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

  void finish() override {
    tensors_.clear();  // the device is done with them
  }

 private:
  std::shared_ptr<NcclState> state_;
  CudaEvent done_;
  std::vector<Tensor> tensors_;
  bool reached_ = false;
};

}  // namespace tensortree::detail
