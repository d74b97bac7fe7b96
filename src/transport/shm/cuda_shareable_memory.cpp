#include "transport/shm/cuda_shareable_memory.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "cuda/cuda_ipc.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// The region's interprocess event, destroyed with the last user of the region.
class IpcEvent {
 public:
  explicit IpcEvent(int device) : device_(device), event_(cuda::ipc::create_event(device)) {}
  IpcEvent(void* opened, int device) : device_(device), event_(opened) {}
  IpcEvent(const IpcEvent&) = delete;
  IpcEvent& operator=(const IpcEvent&) = delete;
  ~IpcEvent() { cuda::ipc::destroy_event(event_, device_); }
  void* get() const { return event_; }

 private:
  int device_;
  void* event_;
};

// Memory handle in bytes [0, 64), event handle in [64, 128).
RegionHandle handle_of(void* base, const IpcEvent& event, int device) {
  RegionHandle handle{};
  const cuda::ipc::Handle memory = cuda::ipc::memory_handle(base, device);
  const cuda::ipc::Handle signal = cuda::ipc::event_handle(event.get(), device);
  std::copy(memory.begin(), memory.end(), handle.begin());
  std::copy(signal.begin(), signal.end(), handle.begin() + 64);
  return handle;
}

cuda::ipc::Handle part(const RegionHandle& handle, std::size_t at) {
  cuda::ipc::Handle out{};
  std::copy_n(handle.begin() + static_cast<std::ptrdiff_t>(at), out.size(), out.begin());
  return out;
}

class OpenedPeerAllocation final : public ImportedRegion {
 public:
  OpenedPeerAllocation(const RegionHandle& handle, int device)
      : device_(device), data_(static_cast<std::byte*>(cuda::ipc::open_memory(part(handle, 0), device))) {
    try {
      bytes_ = cuda::ipc::allocation_bytes(data_, device);
      event_ = std::make_unique<IpcEvent>(cuda::ipc::open_event(part(handle, 64), device), device);
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
  void* event() const { return event_->get(); }

 private:
  int device_;
  std::byte* data_;
  std::uint64_t bytes_ = 0;
  std::unique_ptr<IpcEvent> event_;
};

}  // namespace

ExportedRegion CudaShareableMemory::allocate(std::size_t nbytes) {
  const int device = device_.index();
  // IPC needs a real allocation: never a null pointer for an empty region.
  const std::size_t bytes = std::max<std::size_t>(nbytes, 1);
  void* base = cuda::alloc_device(bytes, device);
  StoragePtr storage = Storage::adopt(base, nbytes, device_, [device](void* p) { cuda::free_device(p, device); });
  auto event = std::make_shared<IpcEvent>(device);
  ExportedRegion region{storage, handle_of(base, *event, device), event};
  const std::lock_guard lock(mutex_);
  std::erase_if(exported_, [](const auto& entry) { return entry.second.storage.expired(); });
  exported_[storage.get()] = {storage, storage->data(), region};
  return region;
}

ExportedRegion CudaShareableMemory::export_storage(const StoragePtr& storage) {
  const std::lock_guard lock(mutex_);
  const auto found = exported_.find(storage.get());
  if (found == exported_.end() || found->second.storage.lock() != storage || storage->data() != found->second.data) {
    return {};
  }
  ExportedRegion region = found->second.region;
  region.storage = storage;
  return region;
}

void CudaShareableMemory::copy_in(const Tensor& source, const ExportedRegion& region) {
  const auto& event = *static_cast<const IpcEvent*>(region.state.get());
  cuda::ipc::copy_and_record(region.storage->data(), source.data_ptr(), source.nbytes(), event.get(), device_.index());
}

void CudaShareableMemory::publish(const ExportedRegion& region) {
  const auto& event = *static_cast<const IpcEvent*>(region.state.get());
  cuda::ipc::copy_and_record(nullptr, nullptr, 0, event.get(), device_.index());
}

std::shared_ptr<ImportedRegion> CudaShareableMemory::open(const RegionHandle& handle, std::uint64_t nbytes) {
  auto opened = std::make_shared<OpenedPeerAllocation>(handle, device_.index());
  if (opened->mapped_bytes() < nbytes) {
    throw CorruptData(fmt::format("CUDA IPC: the peer's allocation holds {} bytes, fewer than the {} announced",
                                  opened->mapped_bytes(), nbytes));
  }
  return opened;
}

void CudaShareableMemory::copy_out(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination) {
  const auto& opened = static_cast<const OpenedPeerAllocation&>(region);
  cuda::ipc::copy_after(destination.data_ptr(), opened.data() + offset, destination.nbytes(), opened.event(),
                        device_.index());
}

}  // namespace tensortree::detail
