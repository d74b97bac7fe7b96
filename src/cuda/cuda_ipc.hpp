// CUDA IPC through the library's window onto CUDA: device memory and events that another process
// on the node opens from a 64-byte handle (for transport/shm). Implemented in cuda_ipc.cpp, or by
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

// An interprocess event (timing disabled) on `device`, and its handle.
void* create_event(int device);
Handle event_handle(void* event, int device);
// A peer's event, opened here; destroyed like one of our own.
void* open_event(const Handle& handle, int device);
void destroy_event(void* event, int device) noexcept;

// Copies `nbytes` from `src` to `dst` (device memory of `device`) on the transport's stream and
// records `event` behind the copy: a peer that waits for the event sees the bytes. Returns without
// waiting for the copy.
void copy_and_record(void* dst, const void* src, std::size_t nbytes, void* event, int device);
// Waits (on the device) for `event`, then copies `nbytes` from `src` to `dst` and returns once the
// copy is done.
void copy_after(void* dst, const void* src, std::size_t nbytes, void* event, int device);

}  // namespace tensortree::cuda::ipc
