// CUDA IPC in a build without CUDA: nothing can be exported or opened.
#include "cuda/cuda_ipc.hpp"
#include "tensortree/error.hpp"

namespace tensortree::cuda::ipc {

namespace {

[[noreturn]] void built_without_cuda() { throw NotSupported("CUDA IPC: tensortree was built without CUDA"); }

}  // namespace

Handle memory_handle(void*, int) { built_without_cuda(); }
void* open_memory(const Handle&, int) { built_without_cuda(); }
void close_memory(void*, int) noexcept {}
std::size_t allocation_bytes(const void*, int) { built_without_cuda(); }
void* create_event(int) { built_without_cuda(); }
Handle event_handle(void*, int) { built_without_cuda(); }
void* open_event(const Handle&, int) { built_without_cuda(); }
void destroy_event(void*, int) noexcept {}
void copy_and_record(void*, const void*, std::size_t, void*, int) { built_without_cuda(); }
void copy_after(void*, const void*, std::size_t, void*, int) { built_without_cuda(); }

}  // namespace tensortree::cuda::ipc
