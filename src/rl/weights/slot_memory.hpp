// Where the slots of a weight publication live, as one Storage per slot (each keeps the memory
// under it alive): host slots are pages of the publication file; CUDA slots are one device
// allocation of the publisher that subscribers on the node map through CUDA IPC.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_ipc.hpp"
#include "rl/weights/control_block.hpp"
#include "tensortree/storage.hpp"

namespace tensortree::rl {

// The slots of `header` inside `mapping` (of which `first_slot` is the start of slot 0).
std::vector<StoragePtr> host_slots(const std::shared_ptr<void>& mapping, std::byte* first_slot,
                                   const FixedHeader& header);

// The publisher's device allocation of `slots` strides on CUDA device `device`, and its IPC handle.
struct DeviceSlots {
  std::vector<StoragePtr> slots;
  cuda::ipc::Handle handle{};
  std::uint64_t bytes = 0;
};
DeviceSlots allocate_device_slots(const FixedHeader& header);
// A subscriber's view of the publisher's device allocation: CorruptData when the allocation the
// handle opens is smaller than the header's slots.
std::vector<StoragePtr> map_device_slots(const FixedHeader& header, const std::string& path);

}  // namespace tensortree::rl
