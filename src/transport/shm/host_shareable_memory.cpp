#include "transport/shm/host_shareable_memory.hpp"

#include <cstring>

#include "core/shared_file.hpp"

namespace tensortree::detail {

namespace {

RegionHandle handle_of(const SharedFileAddress& address) {
  RegionHandle handle{};
  std::memcpy(handle.data(), &address.pid, 4);
  std::memcpy(handle.data() + 4, &address.fd, 4);
  std::memcpy(handle.data() + 8, &address.inode, 8);
  return handle;
}

SharedFileAddress address_in(const RegionHandle& handle) {
  SharedFileAddress address;
  std::memcpy(&address.pid, handle.data(), 4);
  std::memcpy(&address.fd, handle.data() + 4, 4);
  std::memcpy(&address.inode, handle.data() + 8, 8);
  return address;
}

class MappedPeerFile final : public ImportedRegion {
 public:
  explicit MappedPeerFile(StoragePtr mapping) : mapping_(std::move(mapping)) {}
  std::uint64_t mapped_bytes() const override { return mapping_->nbytes(); }
  const std::byte* data() const { return mapping_->data(); }

 private:
  StoragePtr mapping_;
};

}  // namespace

ExportedRegion HostShareableMemory::allocate(std::size_t nbytes) {
  return export_storage(Storage::allocate_shared(nbytes));
}

ExportedRegion HostShareableMemory::export_storage(const StoragePtr& storage) {
  if (!storage || storage->kind() != MemoryKind::SharedHost) return {};
  return {storage, handle_of(address_of(*storage)), nullptr};
}

void HostShareableMemory::copy_in(const Tensor& source, const ExportedRegion& region) {
  if (source.nbytes() > 0) std::memcpy(region.storage->data(), source.data_ptr(), source.nbytes());
}

std::shared_ptr<ImportedRegion> HostShareableMemory::open(const RegionHandle& handle, std::uint64_t nbytes) {
  return std::make_shared<MappedPeerFile>(map_peer_file(address_in(handle), nbytes));
}

void HostShareableMemory::copy_out(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination) {
  const auto& file = static_cast<const MappedPeerFile&>(region);
  if (destination.nbytes() > 0) std::memcpy(destination.data_ptr(), file.data() + offset, destination.nbytes());
}

}  // namespace tensortree::detail
