#include "rl/weights/slot_memory.hpp"

#include <cstring>

#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::rl {

namespace {

std::vector<StoragePtr> slots_in(const std::shared_ptr<void>& owner, std::byte* first, const FixedHeader& header,
                                 Device device) {
  std::vector<StoragePtr> slots;
  slots.reserve(header.slot_count);
  for (std::uint32_t k = 0; k < header.slot_count; ++k) {
    // Each slot's storage shares ownership of the memory: views outlive the publisher or subscriber.
    slots.push_back(Storage::adopt(first + k * header.slot_stride, static_cast<std::size_t>(header.slot_stride),
                                   device, [owner](void*) {}));
  }
  return slots;
}

}  // namespace

std::vector<StoragePtr> host_slots(const std::shared_ptr<void>& mapping, std::byte* first_slot,
                                   const FixedHeader& header) {
  return slots_in(mapping, first_slot, header, Device::cpu());
}

DeviceSlots allocate_device_slots(const FixedHeader& header) {
  const int device = header.cuda_device;
  const std::uint64_t bytes = header.slot_count * header.slot_stride;
  void* base = cuda::alloc_device(static_cast<std::size_t>(bytes), device);
  const std::shared_ptr<void> owner(base, [device](void* p) { cuda::free_device(p, device); });
  DeviceSlots out;
  out.handle = cuda::ipc::memory_handle(base, device);
  out.bytes = bytes;
  out.slots = slots_in(owner, static_cast<std::byte*>(base), header, Device::cuda(device));
  return out;
}

std::vector<StoragePtr> map_device_slots(const FixedHeader& header, const std::string& path) {
  const int device = header.cuda_device;
  cuda::ipc::Handle handle{};
  std::memcpy(handle.data(), header.ipc_handle.data(), handle.size());
  void* base = cuda::ipc::open_memory(handle, device);
  const std::shared_ptr<void> owner(base, [device](void* p) { cuda::ipc::close_memory(p, device); });
  const std::uint64_t needed = header.slot_count * header.slot_stride;
  const std::size_t available = cuda::ipc::allocation_bytes(base, device);
  if (available < needed) {
    throw CorruptData(fmt::format("weight publication {}: its CUDA allocation holds {} bytes, fewer than its {} "
                                  "slots need ({})",
                                  path, available, header.slot_count, needed));
  }
  return slots_in(owner, static_cast<std::byte*>(base), header, Device::cuda(device));
}

}  // namespace tensortree::rl
