// CUDA device memory shared through CUDA IPC: a region is a cudaMalloc allocation. The sender waits
// on the host for its writes to the region to end before the frame goes (cuda::ipc::finish_writes:
// an interprocess event would cost the receiver ~270 us a transfer), the receiver copies and waits
// for its copy before it acknowledges, and it bounds what it reads by the size the driver reports
// for the opened allocation. Works between processes bound to one GPU.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "transport/shm/shareable_memory.hpp"

namespace tensortree::detail {

class CudaShareableMemory final : public ShareableMemory {
 public:
  explicit CudaShareableMemory(Device device) : device_(device) {}

  std::string_view name() const override { return "cuda ipc"; }
  Device device() const override { return device_; }
  ExportedRegion allocate(std::size_t nbytes) override;
  ExportedRegion export_storage(const StoragePtr& storage) override;
  void copy_in(const Tensor& source, const ExportedRegion& region) override;
  void publish(const ExportedRegion& region) override;
  std::shared_ptr<ImportedRegion> open(const RegionHandle& handle, std::uint64_t nbytes) override;
  void copy_out(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination) override;

 private:
  // No strong reference: a region lives while its users do, then goes through its retirement
  // (transport/shm/region_retirement.hpp), which frees it once no peer maps it.
  struct Exported {
    std::weak_ptr<Storage> storage;
    const std::byte* data;
    RegionHandle handle;
  };

  Device device_;
  std::mutex mutex_;
  // The regions allocate() made, by storage: what export_storage finds again.
  std::map<const Storage*, Exported> exported_;
};

}  // namespace tensortree::detail
