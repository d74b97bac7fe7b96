// UploadImage: where load_memmap(..., {.device = cuda}) places each leaf in its one device block,
// and the bytes each staging chunk carries. Host code, checked here without a GPU; the copies
// themselves are checked in tests/gpu/test_memmap_cuda.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "memmap/device_upload.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;
using tensortree::detail::UploadImage;

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
std::vector<std::byte> read_in_chunks(const UploadImage& image, std::size_t chunk) {
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
  UploadImage image;
  std::vector<std::size_t> offsets;
  for (const Tensor& leaf : leaves) offsets.push_back(image.add(leaf));

  std::size_t end = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    INFO("leaf " << i);
    CHECK(offsets[i] % UploadImage::kAlignment == 0);
    CHECK(offsets[i] >= end);
    end = offsets[i] + leaves[i].nbytes();
  }
  CHECK(image.total_bytes() % UploadImage::kAlignment == 0);
  CHECK(image.total_bytes() >= end);
  CHECK(image.total_bytes() < end + UploadImage::kAlignment);

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
  UploadImage image;
  const std::size_t first = image.add(leaves[0]);
  const std::size_t second = image.add(leaves[1]);
  REQUIRE(first == 0);
  REQUIRE(second == UploadImage::kAlignment);

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
  UploadImage image;
  CHECK_THROWS_AS(image.add(matrix.transpose(0, 1)), InvalidArgument);
  CHECK(image.total_bytes() == 0);
}

TEST_CASE("an image keeps its leaves alive after the caller lets them go") {
  UploadImage image;
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
