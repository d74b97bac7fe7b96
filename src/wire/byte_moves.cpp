#include "wire/byte_moves.hpp"

#include <cstring>

#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

Tensor storage_bytes(const StoragePtr& storage, std::size_t offset, std::size_t nbytes) {
  return Tensor(storage, offset, DType::UInt8, {static_cast<std::int64_t>(nbytes)}, {1});
}

void copy_bytes(std::byte* dst, Device dst_device, const std::byte* src, Device src_device, std::size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
  } else {
    cuda::copy_bytes(dst, src, nbytes);
  }
}

StoragePtr sub_storage(const StoragePtr& parent, std::size_t offset, std::size_t nbytes) {
  if (offset + nbytes > parent->nbytes()) {
    throw InvalidArgument(fmt::format("sub_storage: bytes [{}, {}) lie outside a buffer of {} bytes", offset,
                                      offset + nbytes, parent->nbytes()));
  }
  return Storage::adopt(parent->data() + offset, nbytes, parent->device(), [keep = parent](void*) {});
}

}  // namespace tensortree::detail
