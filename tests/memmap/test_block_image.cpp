// BlockImage: where a load into one block (MemmapMode::Copy, or onto a CUDA device) places each
// leaf, and the bytes each chunk carries, from tensors and from files. Host code, checked here
// without a GPU; the device copies themselves are checked in tests/gpu/test_memmap_cuda.cpp.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "memmap/block_image.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;
using tensortree::detail::BlockImage;

namespace {

// Leaf i: `sizes[i]` bytes, each byte a function of (i, position), never zero.
std::vector<Tensor> patterned_leaves(const std::vector<std::int64_t>& sizes) {
  std::vector<Tensor> leaves;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Tensor leaf = Tensor::empty({sizes[i]}, {DType::UInt8});
    auto* data = static_cast<std::uint8_t*>(leaf.data_ptr());
    for (std::int64_t j = 0; j < sizes[i]; ++j) data[j] = static_cast<std::uint8_t>(1 + (i * 31 + j) % 251);
    leaves.push_back(leaf);
  }
  return leaves;
}

// The block as its chunks of `chunk` bytes carry it, put back together.
std::vector<std::byte> read_in_chunks(const BlockImage& image, std::size_t chunk) {
  std::vector<std::byte> block(image.total_bytes(), std::byte{0xEE});
  for (std::size_t offset = 0; offset < block.size(); offset += chunk) {
    image.read(offset, {block.data() + offset, std::min(chunk, block.size() - offset)});
  }
  return block;
}

}  // namespace

TEST_CASE("every leaf lies at an aligned offset after the one before, and chunks of any size carry exactly its bytes") {
  // Sizes around the alignment, empty leaves among them, and one leaf larger than most chunks.
  const std::vector<std::int64_t> sizes = {1, 255, 256, 257, 0, 4096, 3, 0, 10000, 511, 64};
  const std::vector<Tensor> leaves = patterned_leaves(sizes);
  BlockImage image;
  std::vector<std::size_t> offsets;
  for (const Tensor& leaf : leaves) offsets.push_back(image.add(leaf));

  std::size_t end = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    INFO("leaf " << i);
    CHECK(offsets[i] % BlockImage::kAlignment == 0);
    CHECK(offsets[i] >= end);
    end = offsets[i] + leaves[i].nbytes();
  }
  CHECK(image.total_bytes() % BlockImage::kAlignment == 0);
  CHECK(image.total_bytes() >= end);
  CHECK(image.total_bytes() < end + BlockImage::kAlignment);

  // Each leaf's bytes at its offset, zeros everywhere else.
  std::vector<std::byte> expected(image.total_bytes(), std::byte{0});
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    std::memcpy(expected.data() + offsets[i], leaves[i].data_ptr(), leaves[i].nbytes());
  }
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{100}, std::size_t{256}, std::size_t{4096},
                                  std::size_t{5000}, image.total_bytes()}) {
    INFO("chunk " << chunk);
    CHECK(read_in_chunks(image, chunk) == expected);
  }
}

TEST_CASE("a read that covers only padding or only part of one leaf is exact") {
  const std::vector<Tensor> leaves = patterned_leaves({10, 300});
  BlockImage image;
  const std::size_t first = image.add(leaves[0]);
  const std::size_t second = image.add(leaves[1]);
  REQUIRE(first == 0);
  REQUIRE(second == BlockImage::kAlignment);

  std::vector<std::byte> out(50, std::byte{0xEE});
  image.read(100, out);  // between the leaves
  CHECK(std::all_of(out.begin(), out.end(), [](std::byte b) { return b == std::byte{0}; }));

  image.read(second + 7, out);  // inside the second leaf
  CHECK(std::memcmp(out.data(), static_cast<const std::byte*>(leaves[1].data_ptr()) + 7, out.size()) == 0);

  out.assign(20, std::byte{0xEE});
  image.read(5, out);  // the first leaf's tail, then padding
  CHECK(std::memcmp(out.data(), static_cast<const std::byte*>(leaves[0].data_ptr()) + 5, 5) == 0);
  CHECK(std::all_of(out.begin() + 5, out.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("an image holds no view of a tensor that is not contiguous") {
  const Tensor matrix = Tensor::zeros({4, 6}, {DType::Float32});
  BlockImage image;
  CHECK_THROWS_AS(image.add(matrix.transpose(0, 1)), InvalidArgument);
  CHECK(image.total_bytes() == 0);
}

TEST_CASE("an image keeps its leaves alive after the caller lets them go") {
  BlockImage image;
  {
    const std::vector<Tensor> leaves = patterned_leaves({1000});
    image.add(leaves[0]);
  }
  std::vector<std::byte> out(1000);
  image.read(0, out);
  for (std::size_t j = 0; j < out.size(); ++j) {
    INFO("byte " << j);
    REQUIRE(std::to_integer<int>(out[j]) == 1 + static_cast<int>(j % 251));
  }
}

namespace {

// Writes each leaf's bytes to its own file under a fresh directory, removed at scope exit.
struct LeafFiles {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tt_block_image_" + std::to_string(::getpid()));
  std::vector<std::filesystem::path> paths;

  explicit LeafFiles(const std::vector<Tensor>& leaves) {
    std::filesystem::create_directories(dir);
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      paths.push_back(dir / ("leaf" + std::to_string(i)));
      std::ofstream(paths.back(), std::ios::binary)
          .write(static_cast<const char*>(leaves[i].data_ptr()), static_cast<std::streamsize>(leaves[i].nbytes()));
    }
  }
  LeafFiles(const LeafFiles&) = delete;
  LeafFiles& operator=(const LeafFiles&) = delete;
  ~LeafFiles() { std::filesystem::remove_all(dir); }

  tensortree::detail::BlockImage::FileOpener opener(std::vector<int>* opened = nullptr) const {
    return [this, opened](std::size_t index) {
      if (opened != nullptr) ++(*opened)[index];
      return tensortree::detail::OpenedFile{tensortree::detail::FileDescriptor(::open(paths[index].c_str(), O_RDONLY)),
                                            paths[index]};
    };
  }
};

}  // namespace

TEST_CASE("file leaves read into the block as tensor leaves do, each file opened by the chunks that overlap it") {
  const std::vector<std::int64_t> sizes = {1, 255, 256, 257, 4096, 3, 10000, 511, 64};
  const std::vector<Tensor> leaves = patterned_leaves(sizes);
  const LeafFiles files(leaves);
  std::vector<int> opened(leaves.size(), 0);
  BlockImage from_files(files.opener(&opened));
  BlockImage from_tensors;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    CHECK(from_files.add_file(leaves[i].nbytes(), i) == from_tensors.add(leaves[i]));
  }
  REQUIRE(from_files.total_bytes() == from_tensors.total_bytes());
  const std::vector<std::byte> expected = read_in_chunks(from_tensors, from_tensors.total_bytes());
  CHECK(read_in_chunks(from_files, from_files.total_bytes()) == expected);
  CHECK(std::all_of(opened.begin(), opened.end(), [](int n) { return n == 1; }));  // one chunk: each file once

  std::vector<std::byte> block(from_files.total_bytes(), std::byte{0xEE});
  tensortree::detail::read_image(from_files, block.data(), 4096);  // several threads, chunks across leaves
  CHECK(block == expected);
}

TEST_CASE("a file that shrank since it was checked is CorruptData naming it, not bytes left unread") {
  const std::vector<Tensor> leaves = patterned_leaves({5000});
  const LeafFiles files(leaves);
  BlockImage image(files.opener());
  image.add_file(leaves[0].nbytes(), 0);
  std::filesystem::resize_file(files.paths[0], 1000);
  std::vector<std::byte> out(image.total_bytes());
  try {
    image.read(0, out);
    FAIL("a short file was read as if whole");
  } catch (const CorruptData& e) {
    CHECK_THAT(e.what(), Catch::Contains("leaf0") && Catch::Contains("ended at byte 1000 of 5000"));
  }
}

TEST_CASE("an image without a file opener refuses file leaves") {
  BlockImage image;
  CHECK_THROWS_AS(image.add_file(10, 0), InvalidArgument);
}
