// How the library's CUDA work is ordered after the caller's stream (tensortree/cuda_stream.hpp).
// The library queues its copies and kernels on the legacy default stream, and its other streams
// (staging copies, NCCL) wait for that one; so one join of the caller's stream into the legacy
// stream, before each piece of work is queued, orders all of it.
#pragma once

namespace tensortree::detail {

// Makes the current device's legacy default stream wait for what this thread's current stream has
// queued so far. Nothing when no stream was set (or the legacy stream was): then it costs one
// thread-local read.
void order_after_current_stream();

}  // namespace tensortree::detail
