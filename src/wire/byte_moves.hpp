// Byte-level moves between host and device memory that packing, sending and receiving trees share.
#pragma once

#include <cstddef>

#include "tensortree/device.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// Bytes [offset, offset + nbytes) of `storage` as a 1-D uint8 tensor.
Tensor storage_bytes(const StoragePtr& storage, std::size_t offset, std::size_t nbytes);

// Copies between host or device memory on either side (one device kind each).
void copy_bytes(std::byte* dst, Device dst_device, const std::byte* src, Device src_device, std::size_t nbytes);

// A storage viewing bytes [offset, offset + nbytes) of `parent` and keeping it alive: how a tree
// made from one block of a gathered buffer gets a storage of its own that starts at its payload.
StoragePtr sub_storage(const StoragePtr& parent, std::size_t offset, std::size_t nbytes);

}  // namespace tensortree::detail
