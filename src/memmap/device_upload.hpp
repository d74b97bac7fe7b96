// Loading a memory-mapped tree onto a CUDA device. Every leaf lands in one device block, each at
// an aligned offset, so the block's bytes can cross the bus in large chunks however small the
// leaves are. Two windows of pinned buffers carry the chunks: reader threads copy one window's
// chunks out of the mappings (the page-cache side, which one thread cannot keep up with) while a
// stream moves the other window's chunks to the device, so page cache and PCIe work at once.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "tensortree/tensor.hpp"
#include "tensortree/tree.hpp"

namespace tensortree::detail {

// Where each host tensor lies in one device block, and the host bytes of any range of that block.
// Host code only: the part of an upload that needs no device, and can be tested without one.
class UploadImage {
 public:
  // Offsets in the block are multiples of this: cudaMalloc's own alignment, enough for any dtype.
  static constexpr std::size_t kAlignment = 256;

  // Places `host` (contiguous, on the CPU) after the tensors placed so far and keeps it alive;
  // returns its offset in the block. CorruptData when the block would pass SIZE_MAX.
  std::size_t add(const Tensor& host);
  // Bytes of the whole block, padding included.
  std::size_t total_bytes() const { return total_; }
  // Writes the block's bytes [offset, offset + out.size()) into `out`: the parts of the tensors
  // that overlap it, and zeros between them.
  void read(std::size_t offset, std::span<std::byte> out) const;

 private:
  struct Piece {
    std::size_t offset;
    std::size_t bytes;
    Tensor host;  // kept alive, and with it the mapping it views
  };
  std::vector<Piece> pieces_;
  std::size_t total_ = 0;
};

// A tree of the same structure as `host_tree` (leaves contiguous, on the CPU) with every leaf
// copied to `device`, `chunk_bytes` at a time through pinned buffers. The leaves view one device
// block; the copies have finished when it returns. CUDA is called from the calling thread only.
TensorTree upload_tree(const TensorTree& host_tree, Device device, std::size_t chunk_bytes);

}  // namespace tensortree::detail
