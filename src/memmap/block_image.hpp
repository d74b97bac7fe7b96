// BlockImage: the bytes of one block that a tree's leaves are laid out in, each leaf at an aligned
// offset after the one before, read from wherever each leaf's bytes are now: a host tensor (a
// mapping, memory) or a file read on demand. Loading a tree into one block (in this process's
// memory or on a CUDA device) fills the block a chunk at a time from several threads; a chunk
// reads only the files whose leaves it overlaps, so no leaf needs a mapping of its own.
// Host code only: it can be tested without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "core/file_descriptor.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// A leaf's file, open for reading, and its name for messages.
struct OpenedFile {
  FileDescriptor fd;
  std::filesystem::path path;
};

class BlockImage {
 public:
  // Opens the file that holds file leaf `index` (add_file's), checked to hold exactly that leaf's
  // bytes; CorruptData naming the file otherwise. Called from the reading threads, once for each
  // chunk a leaf overlaps, so that nothing stays open between chunks.
  using FileOpener = std::function<OpenedFile(std::size_t index)>;

  // Offsets in the block are multiples of this: cudaMalloc's own alignment, enough for any dtype.
  static constexpr std::size_t kAlignment = 256;

  BlockImage() = default;
  explicit BlockImage(FileOpener open_file) : open_file_(std::move(open_file)) {}

  // Places `host` (contiguous, on the CPU) after the leaves placed so far and keeps it alive;
  // returns its offset in the block. CorruptData when the block would pass SIZE_MAX.
  std::size_t add(const Tensor& host);
  // Places a leaf of `bytes` whose bytes the file opened by open_file(index) holds.
  std::size_t add_file(std::uint64_t bytes, std::size_t index);
  // Bytes of the whole block, padding included.
  std::size_t total_bytes() const { return total_; }
  // Writes the block's bytes [offset, offset + out.size()) into `out`: the parts of the leaves
  // that overlap it, and zeros between them. Safe to call from several threads at once.
  void read(std::size_t offset, std::span<std::byte> out) const;
  // Writes the file leaves' bytes to destinations[index] (add_file's index), each to memory of its
  // own, in chunks of `chunk_bytes` from several threads; tensor leaves and padding are not written.
  void read_files(std::span<std::byte* const> destinations, std::size_t chunk_bytes) const;

 private:
  struct Piece {
    std::size_t offset;
    std::size_t bytes;
    Tensor host;             // defined: the leaf's bytes, kept alive (and with them a mapping they view)
    std::size_t file_index;  // host undefined: the leaf's file
  };
  std::size_t place(std::uint64_t bytes);
  void read_piece(const Piece& piece, std::size_t from, std::span<std::byte> out) const;

  FileOpener open_file_;
  std::vector<Piece> pieces_;
  std::size_t total_ = 0;
};

// Reads the whole image into `block` (total_bytes() of host memory), `chunk_bytes` at a time from
// several threads: page-cache copies run at a few GB/s per thread.
void read_image(const BlockImage& image, std::byte* block, std::size_t chunk_bytes);

}  // namespace tensortree::detail
