// NcclState: what an NCCL backend and its Works share (communicator, stream, the group's place),
// so that a Work may outlive the backend that returned it.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <mutex>
#include <string>

#include "core/text_format.hpp"
#include "cuda/cuda_check.hpp"
#include "transport/nccl/nccl_check.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/stream_order.hpp"
#include "transport/nccl/nccl_handles.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

class NcclState {
 public:
  // With `device` current.
  NcclState(int rank, int size, int device, std::chrono::milliseconds timeout, const ncclUniqueId& id)
      : rank_(rank),
        size_(size),
        device_(device),
        timeout_(timeout),
        // Non-blocking: the legacy default stream does not wait for NCCL's work, so a receive that
        // waits for a peer never stalls the library's copies.
        stream_(make_stream(StreamKind::NonBlocking)),
        producer_(make_event()),
        comm_(rank, size, id) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  // The longest a wait on one operation may last (the group's GroupOptions::timeout).
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::string where() const {
    return fmt::format("rank {} of {} on cuda:{}", rank_, size_, device_);
  }

  // Group::abort: NCCL's kernels stop waiting for peers, and every later use throws.
  void abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (comm_.aborted()) return;
    abort_reason_ = fmt::format("{} (Group::abort)", reason);
    comm_.abort();
  }
  bool aborted() {
    std::lock_guard lock(mutex_);
    return comm_.aborted();
  }

  // Queues `enqueue(comm, stream)` behind the work already on the legacy default stream and
  // records `done` after it. With the backend's device current.
  template <class Enqueue>
  void run(cudaEvent_t done, Enqueue&& enqueue) {
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    // The caller's tensors were written on the legacy default stream, where the library's copies
    // and kernels run, or on the caller's stream, which the legacy stream then waits for; the
    // operation must see those values.
    order_after_current_stream();
    TT_CUDA_CHECK(cudaEventRecord(producer_.get(), cudaStreamLegacy));
    TT_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), producer_.get(), 0));
    enqueue(comm_.get(), stream_.get());
    TT_CUDA_CHECK(cudaEventRecord(done, stream_.get()));
  }

  // Throws BackendError if NCCL has hit an asynchronous error (aborting the communicator) or the
  // communicator was aborted earlier.
  void check_async_error() {
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    ncclResult_t status = ncclSuccess;
    TT_NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &status));
    if (status == ncclSuccess || status == ncclInProgress) return;
    const std::string text = fmt::format("{} ({}; the communicator was aborted)", nccl_error_text(status), where());
    abort_reason_ = fmt::format("an earlier error: {}", text);
    comm_.abort();
    throw_foreign_error("NCCL", "ncclCommGetAsyncError", text, static_cast<long>(status), __FILE__, __LINE__);
  }

 private:
  void throw_if_aborted() const {
    if (comm_.aborted()) {
      throw BackendError(fmt::format("the NCCL communicator of {} was aborted after {}; create a new group", where(),
                                     abort_reason_));
    }
  }

  const int rank_;
  const int size_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::string abort_reason_;  // NCCL communicators are not thread-safe
  CudaStream stream_;
  CudaEvent producer_;  // reused: a stream wait captures the event's state when it is called
  NcclComm comm_;       // declared last: destroyed before the stream its operations ran on
};

}  // namespace tensortree::detail
