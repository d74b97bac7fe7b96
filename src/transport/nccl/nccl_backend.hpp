// The NCCL engine: every Collectives and PeerTransport operation on CUDA tensors of one device,
// through one NCCL communicator. Free of CUDA and NCCL headers, so the MPI code that bootstraps it needs neither.
//
// Ordering and completion:
// - each operation runs on the backend's own CUDA stream, after everything already queued on the
//   device's legacy default stream (where the library's copies and kernels run), so it reads the
//   values its caller wrote;
// - its Work records a CUDA event behind it: is_completed() queries the event and never blocks;
//   wait() returns once the results are in device memory, so anything issued afterwards, on any
//   stream, sees them. While waiting, NCCL's asynchronous error state is polled too: an error
//   (a peer that died, a network failure) aborts the communicator and is rethrown as BackendError,
//   where a plain cudaEventSynchronize would hang forever; a wait longer than the group's timeout
//   throws Timeout, and Group::abort aborts the communicator;
// - a Work keeps its tensors, and the communicator, alive until the operation has finished; one
//   dropped while in flight waits for it up to the timeout, then abandons it with its buffers;
// - an operation that moves no bytes completes at once without NCCL (all ranks agree on sizes).
//
// What NCCL cannot do:
// - no tags: messages between two ranks match in the order they were posted, `tag` is ignored;
// - no receive from kAnySource, and no bitwise reductions (NotSupported);
// - reductions need an element type NCCL computes in: 8/32/64-bit integers, float16, float32,
//   float64, bfloat16 and the float8 types where this NCCL has them (float8 without AVG, which
//   NCCL refuses); complex tensors reduce with SUM and AVG as pairs of reals; bool SUM is logical
//   OR and PRODUCT logical AND (as in PyTorch), MIN and MAX work, AVG does not. Any other
//   combination is NotSupported naming dtype and op.
//   Data movement (broadcast, gathers, scatter, all_to_all, send/recv) takes every dtype as bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "comm/engine.hpp"

namespace tensortree::detail {

// Collective over the `size` ranks: creates a communicator whose rank `rank` uses CUDA device
// `device`. Rank 0 creates the ncclUniqueId and `broadcast_unique_id` must hand those bytes to
// every rank, in place (MPI_Bcast from rank 0; a no-op when size is 1). Returns once every rank
// has joined. Waits on its operations throw Timeout after `timeout`. InvalidArgument for a rank,
// size or device that cannot be; BackendError from NCCL.
std::unique_ptr<Engine> make_nccl_backend(
    int rank, int size, int device, std::chrono::milliseconds timeout,
    const std::function<void(std::span<std::byte>)>& broadcast_unique_id);

}  // namespace tensortree::detail
