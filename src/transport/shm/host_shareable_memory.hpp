// Host memory shared through sealed memfds: a peer opens a region as /proc/<pid>/fd/<fd> (checked
// by inode and seals, core/shared_file.hpp) and maps only the bytes a transfer needs. Nothing is
// named in the file system: a process that dies leaves no segment behind.
#pragma once

#include "transport/shm/shareable_memory.hpp"

namespace tensortree::detail {

class HostShareableMemory final : public ShareableMemory {
 public:
  std::string_view name() const override { return "memfd"; }
  Device device() const override { return Device::cpu(); }
  ExportedRegion allocate(std::size_t nbytes) override;
  ExportedRegion export_storage(const StoragePtr& storage) override;
  void copy_in(const Tensor& source, const ExportedRegion& region) override;
  void publish(const ExportedRegion&) override {}
  std::shared_ptr<ImportedRegion> open(const RegionHandle& handle, std::uint64_t nbytes) override;
  void copy_out(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination) override;
  bool streams() const override { return true; }
  void start_stream(const ExportedRegion& region) override;
  void copy_in_streamed(const Tensor& source, const ExportedRegion& region, std::size_t chunk) override;
  std::uint64_t streamed_bytes(const ImportedRegion& region) override;
  void copy_out_part(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination,
                     std::uint64_t begin, std::uint64_t end) override;
};

}  // namespace tensortree::detail
