#include "memmap/block_image.hpp"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cstring>

#include "core/checked_math.hpp"
#include "memmap/memmap_fs.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

std::size_t BlockImage::place(std::uint64_t bytes) {
  const std::size_t offset = total_;
  const auto end = checked_add<std::uint64_t>(offset, bytes);
  const auto padded = end ? checked_align_up(*end, kAlignment) : std::nullopt;
  if (!padded || *padded > SIZE_MAX) throw CorruptData("load: the tree's leaves hold more bytes than memory can");
  total_ = static_cast<std::size_t>(*padded);
  return offset;
}

std::size_t BlockImage::add(const Tensor& host) {
  if (host.device().is_cuda() || !host.is_contiguous()) {
    throw InvalidArgument("load: a leaf to place in a block must be contiguous and on the CPU");
  }
  if (host.nbytes() == 0) return total_;
  const std::size_t offset = place(host.nbytes());
  pieces_.push_back({offset, host.nbytes(), host, 0});
  return offset;
}

std::size_t BlockImage::add_file(std::uint64_t bytes, std::size_t index) {
  if (!open_file_) throw InvalidArgument("load: a block image without a file opener cannot hold file leaves");
  if (bytes == 0) return total_;
  const std::size_t offset = place(bytes);
  pieces_.push_back({offset, static_cast<std::size_t>(bytes), Tensor(), index});
  return offset;
}

void BlockImage::read_piece(const Piece& piece, std::size_t from, std::span<std::byte> out) const {
  if (piece.host.defined()) {
    std::memcpy(out.data(), static_cast<const std::byte*>(piece.host.data_ptr()) + from, out.size());
    return;
  }
  const OpenedFile file = open_file_(piece.file_index);
  // The file was checked to hold the whole leaf when it was opened: one that ends early shrank since.
  read_all(file.fd.get(), out.data(), out.size(), file.path, from);
}

void BlockImage::read(std::size_t offset, std::span<std::byte> out) const {
  const std::size_t end = offset + out.size();
  // The first piece that ends after `offset`; pieces lie in order without overlapping.
  auto piece = std::upper_bound(pieces_.begin(), pieces_.end(), offset,
                                [](std::size_t at, const Piece& p) { return at < p.offset + p.bytes; });
  std::size_t written = offset;  // block bytes of `out` filled so far
  for (; piece != pieces_.end() && piece->offset < end; ++piece) {
    const std::size_t from = std::max(offset, piece->offset);
    const std::size_t to = std::min(end, piece->offset + piece->bytes);
    std::memset(out.data() + (written - offset), 0, from - written);
    read_piece(*piece, from - piece->offset, out.subspan(from - offset, to - from));
    written = to;
  }
  std::memset(out.data() + (written - offset), 0, end - written);
}

void BlockImage::read_files(std::span<std::byte* const> destinations, std::size_t chunk_bytes) const {
  const std::size_t chunk = std::max<std::size_t>(chunk_bytes, 4096);
  struct Part {
    const Piece* piece;
    std::byte* destination;
    std::size_t from;
  };
  std::vector<Part> parts;
  for (const Piece& piece : pieces_) {
    if (piece.host.defined()) continue;
    if (piece.file_index >= destinations.size()) throw InvalidArgument("load: a file leaf has nowhere to go");
    for (std::size_t from = 0; from < piece.bytes; from += chunk) {
      parts.push_back({&piece, destinations[piece.file_index], from});
    }
  }
  oneapi::tbb::parallel_for(std::size_t{0}, parts.size(), [&](std::size_t i) {
    const Part& part = parts[i];
    read_piece(*part.piece, part.from, {part.destination + part.from, std::min(chunk, part.piece->bytes - part.from)});
  });
}

void read_image(const BlockImage& image, std::byte* block, std::size_t chunk_bytes) {
  const std::size_t total = image.total_bytes();
  const std::size_t chunk = std::max<std::size_t>(chunk_bytes, 4096);
  const std::size_t chunks = total / chunk + (total % chunk != 0);
  oneapi::tbb::parallel_for(std::size_t{0}, chunks, [&](std::size_t i) {
    const std::size_t offset = i * chunk;
    image.read(offset, {block + offset, std::min(chunk, total - offset)});
  });
}

}  // namespace tensortree::detail
