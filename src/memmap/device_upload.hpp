// Loading a tree's block onto a CUDA device. The block's bytes (a BlockImage: every leaf at an
// aligned offset) cross the bus in large chunks however small the leaves are. A ring of pinned
// buffers carries the chunks: reader threads read the next chunks out of the leaves' files (the
// page-cache side, which one thread cannot keep up with) while a stream moves the chunks read
// before them to the device, so page cache and PCIe work at once.
#pragma once

#include <cstddef>

#include "memmap/block_image.hpp"
#include "tensortree/device.hpp"
#include "tensortree/storage.hpp"

namespace tensortree::detail {

// A block on `device` holding the image's bytes, copied `chunk_bytes` at a time through pinned
// buffers; the copies have finished when it returns. CUDA is called from the calling thread only.
StoragePtr upload_image(const BlockImage& image, Device device, std::size_t chunk_bytes);

}  // namespace tensortree::detail
