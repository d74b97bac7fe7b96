#include "transport/shm/cuda_shareable_memory.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "cuda/cuda_ipc.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// The memory handle in bytes [0, 64); the rest of a region handle is zero.
constexpr std::size_t kMemoryHandleBytes = sizeof(cuda::ipc::Handle);

RegionHandle handle_of(void* base, int device) {
  RegionHandle handle{};
  const cuda::ipc::Handle memory = cuda::ipc::memory_handle(base, device);
  std::copy(memory.begin(), memory.end(), handle.begin());
  return handle;
}

cuda::ipc::Handle memory_handle_in(const RegionHandle& handle) {
  const auto rest = std::span(handle).subspan(kMemoryHandleBytes);
  if (std::any_of(rest.begin(), rest.end(), [](std::byte b) { return b != std::byte{0}; })) {
    throw CorruptData("CUDA IPC: a region handle with non-zero bytes after its memory handle");
  }
  cuda::ipc::Handle memory{};
  std::copy_n(handle.begin(), memory.size(), memory.begin());
  return memory;
}

class OpenedPeerAllocation final : public ImportedRegion {
 public:
  OpenedPeerAllocation(const cuda::ipc::Handle& handle, int device)
      : device_(device), data_(static_cast<std::byte*>(cuda::ipc::open_memory(handle, device))) {
    try {
      bytes_ = cuda::ipc::allocation_bytes(data_, device);
    } catch (...) {
      cuda::ipc::close_memory(data_, device_);
      throw;
    }
  }
  OpenedPeerAllocation(const OpenedPeerAllocation&) = delete;
  OpenedPeerAllocation& operator=(const OpenedPeerAllocation&) = delete;
  ~OpenedPeerAllocation() override { cuda::ipc::close_memory(data_, device_); }

  std::uint64_t mapped_bytes() const override { return bytes_; }
  const std::byte* data() const { return data_; }

 private:
  int device_;
  std::byte* data_;
  std::uint64_t bytes_ = 0;
};

}  // namespace

// Library memory (MemoryKind::Device), so that a tree consolidated into it (Group-aware
// consolidation, a packed send) is sent from it as it is, its wire header written behind it.
ExportedRegion CudaShareableMemory::allocate(std::size_t nbytes) {
  // IPC needs a real allocation: never a null pointer for an empty region.
  StoragePtr storage = Storage::allocate(std::max<std::size_t>(nbytes, 1), device_);
  ExportedRegion region{storage, handle_of(storage->data(), device_.index())};
  const std::lock_guard lock(mutex_);
  std::erase_if(exported_, [](const auto& entry) { return entry.second.storage.expired(); });
  exported_[storage.get()] = {storage, storage->data(), region.handle};
  return region;
}

ExportedRegion CudaShareableMemory::export_storage(const StoragePtr& storage) {
  const std::lock_guard lock(mutex_);
  const auto found = exported_.find(storage.get());
  if (found == exported_.end() || found->second.storage.lock() != storage || storage->data() != found->second.data) {
    return {};
  }
  return {storage, found->second.handle};
}

void CudaShareableMemory::copy_in(const Tensor& source, const ExportedRegion& region) {
  cuda::ipc::copy_and_wait(region.storage->data(), source.data_ptr(), source.nbytes(), device_.index());
}

void CudaShareableMemory::publish(const ExportedRegion&) { cuda::ipc::finish_writes(device_.index()); }

std::shared_ptr<ImportedRegion> CudaShareableMemory::open(const RegionHandle& handle, std::uint64_t nbytes) {
  auto opened = std::make_shared<OpenedPeerAllocation>(memory_handle_in(handle), device_.index());
  if (opened->mapped_bytes() < nbytes) {
    throw CorruptData(fmt::format("CUDA IPC: the peer's allocation holds {} bytes, fewer than the {} announced",
                                  opened->mapped_bytes(), nbytes));
  }
  return opened;
}

void CudaShareableMemory::copy_out(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination) {
  const auto& opened = static_cast<const OpenedPeerAllocation&>(region);
  cuda::ipc::copy_and_wait(destination.data_ptr(), opened.data() + offset, destination.nbytes(), device_.index());
}

}  // namespace tensortree::detail
