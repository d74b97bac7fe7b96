// CUDA IPC through the library's window onto CUDA: device memory that another process on the node
// opens from a 64-byte handle (for transport/shm). Implemented in cuda_ipc.cpp, or by
// cuda_ipc_absent.cpp (NotSupported) in a build without CUDA.
#pragma once

#include <array>
#include <cstddef>

namespace tensortree::cuda::ipc {

using Handle = std::array<std::byte, 64>;

// The handle of the allocation `base` (a cudaMalloc result) on `device`.
Handle memory_handle(void* base, int device);
// The exporting process's allocation, mapped into this one on `device` (peer access enabled as
// needed); released by close_memory.
void* open_memory(const Handle& handle, int device);
void close_memory(void* mapped, int device) noexcept;
// The bytes of the allocation that `ptr` (its base) starts, as the driver records it: how a
// receiver bounds what a peer's handle lets it read.
std::size_t allocation_bytes(const void* ptr, int device);

// The hand-over is synchronized on the host, not through interprocess events: a peer's wait for
// an interprocess event costs about 270 us on an H100, whatever the size (bench_cuda_ipc), while a
// host synchronization of the writer's stream before its frame costs about 12.
//
// Returns once every write this process queued on `device` before the call (the legacy stream,
// ordered after the caller's current stream) is done: a peer told afterwards sees the bytes.
void finish_writes(int device);
// Copies `nbytes` from `src` to `dst` (device memory of `device`, either may be a peer's mapping)
// after the work queued before it, and returns once the copy is done.
void copy_and_wait(void* dst, const void* src, std::size_t nbytes, int device);

}  // namespace tensortree::cuda::ipc
