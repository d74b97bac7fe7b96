#include "transport/shm/host_shareable_memory.hpp"

#include <algorithm>
#include <atomic>
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

// The progress word of a region: written by its owner only, read by peers through a read-only
// mapping (an atomic load is a plain read there).
std::atomic_ref<std::uint64_t> progress_word(const std::byte* region_start) {
  static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free, "peers in other processes read it");
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(region_start)));
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
  return {storage, handle_of(address_of(*storage))};
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

void HostShareableMemory::start_stream(const ExportedRegion& region) {
  progress_word(region.storage->data()).store(0, std::memory_order_release);
}

void HostShareableMemory::copy_in_streamed(const Tensor& source, const ExportedRegion& region, std::size_t chunk) {
  const std::atomic_ref<std::uint64_t> written = progress_word(region.storage->data());
  const auto* from = static_cast<const std::byte*>(source.data_ptr());
  std::byte* to = region.storage->data() + kProgressBytes;
  const std::size_t total = source.nbytes();
  for (std::size_t done = 0; done < total;) {
    const std::size_t piece = std::min(chunk, total - done);
    std::memcpy(to + done, from + done, piece);
    done += piece;
    written.store(done, std::memory_order_release);
  }
}

std::uint64_t HostShareableMemory::streamed_bytes(const ImportedRegion& region) {
  return progress_word(static_cast<const MappedPeerFile&>(region).data()).load(std::memory_order_acquire);
}

void HostShareableMemory::copy_out_part(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination,
                                        std::uint64_t begin, std::uint64_t end) {
  const auto& file = static_cast<const MappedPeerFile&>(region);
  if (end > begin) std::memcpy(static_cast<std::byte*>(destination.data_ptr()) + begin, file.data() + offset + begin, end - begin);
}

}  // namespace tensortree::detail
