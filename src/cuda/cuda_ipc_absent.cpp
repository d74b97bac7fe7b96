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
void finish_writes(int) { built_without_cuda(); }
void copy_and_wait(void*, const void*, std::size_t, int) { built_without_cuda(); }

}  // namespace tensortree::cuda::ipc
