#include "tensortree/storage.hpp"

#include <atomic>
#include <new>
#include <utility>

#include "core/cuda_api.hpp"
#include "core/storage_access.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

// 64 bytes: a cache line, and the alignment the consolidated layout gives every leaf.
constexpr std::align_val_t kHostAlignment{64};

}  // namespace

Storage::Storage(std::byte* data, std::size_t nbytes, Device device, MemoryKind kind,
                 Deleter deleter)
    : data_(data), nbytes_(nbytes), device_(device), kind_(kind), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, Device device, bool pinned) {
  if (device.is_cuda()) {
    if (pinned) throw InvalidArgument(fmt::format("pinned memory is host memory; it cannot be on {}", device));
    // Checked here because selecting a device that does not exist would quietly allocate elsewhere.
    const int index = resolve_device(device).index();
    auto* data = static_cast<std::byte*>(cuda::alloc_device(nbytes, index));
    return std::shared_ptr<Storage>(new Storage(data, nbytes, Device::cuda(index), MemoryKind::Device,
                                                [index](void* p) { cuda::free_device(p, index); }));
  }
  if (pinned) {
    resolve_device(Device::cuda());  // page-locking needs a usable CUDA device: NotSupported otherwise
    auto* data = static_cast<std::byte*>(cuda::alloc_pinned(nbytes));
    return std::shared_ptr<Storage>(new Storage(data, nbytes, Device::cpu(), MemoryKind::PinnedHost,
                                                [](void* p) { cuda::free_pinned(p); }));
  }
  auto* data = static_cast<std::byte*>(::operator new(nbytes, kHostAlignment));
  return std::shared_ptr<Storage>(new Storage(data, nbytes, Device::cpu(), MemoryKind::Host,
                                              [](void* p) { ::operator delete(p, kHostAlignment); }));
}

std::shared_ptr<Storage> Storage::adopt(void* data, std::size_t nbytes, Device device,
                                        Deleter deleter) {
  // Only "the current device" is resolved: foreign memory names its device, which is trusted as is.
  const Device owner = device.is_cpu() || device.index() == -1 ? resolve_device(device) : device;
  std::shared_ptr<Storage> storage(
      new Storage(static_cast<std::byte*>(data), nbytes, owner, MemoryKind::Foreign, nullptr));
  // Handed over only now, so that the deleter never runs when adopt itself throws.
  storage->deleter_ = std::move(deleter);
  return storage;
}

namespace {

std::atomic<std::uint64_t>& trades() {
  static std::atomic<std::uint64_t> count{0};
  return count;
}

}  // namespace

void detail::StorageAccess::swap_memory(Storage& a, Storage& b) {
  if (a.device_ != b.device_) {
    throw InvalidArgument(fmt::format("swap_memory needs two storages on one device; got {} and {}", a.device_,
                                      b.device_));
  }
  std::swap(a.data_, b.data_);
  std::swap(a.nbytes_, b.nbytes_);
  std::swap(a.kind_, b.kind_);
  std::swap(a.deleter_, b.deleter_);
  std::swap(a.shared_fd_, b.shared_fd_);
  trades().fetch_add(1, std::memory_order_acq_rel);  // after the swap: a reader that sees the count sees it
}

std::uint64_t detail::StorageAccess::memory_trades() noexcept { return trades().load(std::memory_order_acquire); }

void detail::StorageAccess::hand_over_on_release(Storage& storage,
                                                 std::function<void(std::shared_ptr<Storage>)> keep) {
  std::shared_ptr<Storage> owner(
      new Storage(storage.data_, storage.nbytes_, storage.device_, storage.kind_, std::move(storage.deleter_)));
  owner->shared_fd_ = storage.shared_fd_;  // still reported by `storage`; closed by the owner's deleter
  storage.deleter_ = [owner = std::move(owner), keep = std::move(keep)](void*) mutable { keep(std::move(owner)); };
}

std::shared_ptr<Storage> detail::StorageAccess::take_memory(Storage& from) {
  std::shared_ptr<Storage> taken(new Storage(nullptr, 0, from.device_, from.kind_, nullptr));
  swap_memory(*taken, from);
  return taken;
}

}  // namespace tensortree
