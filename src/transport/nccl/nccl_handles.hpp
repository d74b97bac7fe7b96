// RAII for what the NCCL backend holds of NCCL: the communicator and the scope of an NCCL group.
// Its CUDA stream and events are the cuda layer's (cuda/cuda_handles.hpp).
#pragma once

#include <nccl.h>

#include "transport/nccl/nccl_check.hpp"

namespace tensortree::detail {

// Owns the ncclComm_t. Destroyed normally, unless an error made it abort first.
class NcclComm {
 public:
  NcclComm(int rank, int size, const ncclUniqueId& id) {
    TT_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  ncclComm_t get() const { return comm_; }
  bool aborted() const { return comm_ == nullptr; }
  // After an asynchronous error NCCL's kernels may wait forever for a peer; aborting makes them
  // exit and frees the communicator.
  void abort() noexcept {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_ = nullptr;
};

// ncclGroupStart/End for a scope. When a call inside the group fails, NCCL marks the group failed
// and ncclGroupEnd discards what was queued, so closing it while unwinding launches nothing.
// Hence nothing but NCCL calls may throw between the two.
class NcclGroup {
 public:
  NcclGroup() { TT_NCCL_CHECK(ncclGroupStart()); }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }

  void end() {
    open_ = false;
    TT_NCCL_CHECK(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

}  // namespace tensortree::detail
