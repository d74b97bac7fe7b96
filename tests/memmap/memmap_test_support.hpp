// Shared by the memmap tests: scratch directories, patterned leaves of every dtype, byte-level
// comparison of trees, and small file helpers.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tensortree/memmap.hpp"
#include "tensortree/tensortree.hpp"

namespace memmap_test {

namespace fs = std::filesystem;
using namespace tensortree;

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device random;
    std::string name = "tt_memmap_";
    name += std::to_string(::getpid());
    name += '_';
    name += std::to_string(random());
    path_ = fs::temp_directory_path() / name;
    fs::create_directories(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Non-zero values that depend on the element index and on `seed` (one seed per leaf).
inline Tensor patterned(const Shape& shape, DType dtype, int seed) {
  if (dtype == DType::Bool) {
    Tensor t = Tensor::empty(shape, {DType::Bool});
    bool* data = t.data<bool>();
    for (std::int64_t i = 0; i < t.numel(); ++i) data[i] = (i + seed) % 3 != 0;
    return t;
  }
  return Tensor::arange(shape, 1 + seed % 40, 1, {dtype});
}

inline std::vector<unsigned char> bytes_of(const Tensor& tensor) {
  const Tensor host = tensor.to(Device::cpu()).contiguous();
  const auto* data = static_cast<const unsigned char*>(host.data_ptr());
  return {data, data + host.nbytes()};
}

// Same keys in the same order, batch sizes, dtypes, shapes and bytes.
inline void require_same_tree(const TensorTree& actual, const TensorTree& expected) {
  REQUIRE(actual.batch_size() == expected.batch_size());
  REQUIRE(actual.keys({.include_nested = true}) == expected.keys({.include_nested = true}));
  for (const auto& [path, leaf] : expected.leaves()) {
    INFO("leaf " << path_str(path));
    const Tensor& got = actual.get(path);
    REQUIRE(got.dtype() == leaf.dtype());
    REQUIRE(got.shape() == leaf.shape());
    REQUIRE(bytes_of(got) == bytes_of(leaf));
  }
  for (const Path& path : expected.keys({.include_nested = true})) {
    if (!expected.is_leaf(path)) REQUIRE(actual.subtree(path).batch_size() == expected.subtree(path).batch_size());
  }
}

inline std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
}

// "<prefix><n>", spelled out because GCC 12 warns (-Wrestrict, wrongly) on a literal + std::to_string.
inline std::string numbered(const char* prefix, int n) {
  std::string out(prefix);
  out += std::to_string(n);
  return out;
}

}  // namespace memmap_test
