#include "tensortree/storage.hpp"

#include <new>
#include <utility>

#include "cuda/cuda_api.hpp"
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
    if (pinned) throw InvalidArgument("pinned memory is host memory; it cannot be on " + device.str());
    const int index = device.index() < 0 ? cuda::current_device() : device.index();
    auto* data = static_cast<std::byte*>(cuda::alloc_device(nbytes, index));
    return std::shared_ptr<Storage>(new Storage(data, nbytes, Device::cuda(index), MemoryKind::Device,
                                                [index](void* p) { cuda::free_device(p, index); }));
  }
  if (pinned) {
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
  return std::shared_ptr<Storage>(new Storage(static_cast<std::byte*>(data), nbytes, device,
                                              MemoryKind::Foreign, std::move(deleter)));
}

}  // namespace tensortree
