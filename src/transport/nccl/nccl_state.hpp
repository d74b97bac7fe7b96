// NcclState: what an NCCL backend and its Works share (communicator, stream, the group's place),
// so that a Work may outlive the backend that returned it.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <mutex>
#include <string>

#include "cuda/cuda_check.hpp"
#include "transport/nccl/nccl_check.hpp"
#include "transport/nccl/nccl_handles.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

class NcclState {
 public:
  // With `device` current.
  NcclState(int rank, int size, int device, const ncclUniqueId& id)
      : rank_(rank),
        size_(size),
        device_(device),
        stream_(make_stream()),
        producer_(make_event()),
        comm_(rank, size, id) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

  // Queues `enqueue(comm, stream)` behind the work already on the legacy default stream and
  // records `done` after it. With the backend's device current.
  template <class Enqueue>
  void run(cudaEvent_t done, Enqueue&& enqueue) {
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    // The caller's tensors were written on the legacy default stream, where the library's copies
    // and kernels run; the operation must see those values.
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
    const std::string text = nccl_error_text(status) + " (" + where() + "; the communicator was aborted)";
    comm_.abort();
    throw_foreign_error("NCCL", "ncclCommGetAsyncError", text, static_cast<long>(status), __FILE__, __LINE__);
  }

 private:
  std::string where() const {
    return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
           " on cuda:" + std::to_string(device_);
  }

  void throw_if_aborted() const {
    if (comm_.aborted()) {
      throw BackendError("the NCCL communicator of " + where() +
                         " was aborted after an earlier error; create a new group");
    }
  }

  const int rank_;
  const int size_;
  const int device_;
  std::mutex mutex_;  // NCCL communicators are not thread-safe
  CudaStream stream_;
  CudaEvent producer_;  // reused: a stream wait captures the event's state when it is called
  NcclComm comm_;       // declared last: destroyed before the stream its operations ran on
};

}  // namespace tensortree::detail
