// TensorTree::load_memmap(..., {.device = cuda}) copies the mapped leaves into one device block
// through pinned staging buffers, chunk by chunk; memmap_ of a CUDA tree writes the same
// files as the CPU tree.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>

#include "../memmap/memmap_test_support.hpp"

using namespace tensortree;
using namespace memmap_test;

namespace {

const Device kGpu = Device::cuda(0);

TensorTree mixed_tree() {
  TensorTree tree(Shape{4});
  int seed = 1;
  for (DType dtype : kAllDTypes) tree.set(Path{"dtypes", std::string(dtype_name(dtype))}, patterned({4, 1000}, dtype, seed++));
  tree.set(Path{"empty"}, Tensor::empty({4, 0}, {DType::Float32}));
  tree.set(Path{"next", "reward"}, patterned({4}, DType::Float32, seed++));
  return tree;
}

}  // namespace

TEST_CASE("a memmap tree loads onto the GPU byte for byte, across many staging chunks") {
  const ScratchDir scratch;
  TensorTree tree = mixed_tree();
  const TensorTree source = tree;
  tree.memmap_(scratch / "t");
  for (const std::size_t staging : {std::size_t{4096}, std::size_t{16} << 20}) {
    INFO("staging " << staging);
    const TensorTree gpu = TensorTree::load_memmap(scratch / "t", {.device = kGpu, .staging_bytes = staging});
    for (const auto& [path, leaf] : gpu.leaves()) REQUIRE(leaf.device() == kGpu);
    require_same_tree(gpu, source);
  }
  const TensorTree next = TensorTree::load_memmap(scratch / "t", {.device = kGpu, .sub_path = {"next"}});
  require_same_tree(next, source.subtree("next"));
}

TEST_CASE("many small leaves of odd sizes load onto the GPU, several to a chunk and across chunks") {
  const ScratchDir scratch;
  TensorTree tree(Shape{3});
  for (int i = 0; i < 300; ++i) {
    const DType dtype = kAllDTypes[static_cast<std::size_t>(i) % kAllDTypes.size()];
    tree.set(Path{"group_" + std::to_string(i / 10), "leaf_" + std::to_string(i)}, patterned({3, 1 + i * 7 % 97}, dtype, i + 1));
  }
  const TensorTree source = tree;
  tree.memmap_(scratch / "t", {.durable = false});
  for (const std::size_t staging : {std::size_t{4096}, std::size_t{1} << 20}) {
    INFO("staging " << staging);
    const TensorTree gpu = TensorTree::load_memmap(scratch / "t", {.device = kGpu, .staging_bytes = staging});
    for (const auto& [path, leaf] : gpu.leaves()) REQUIRE(leaf.device() == kGpu);
    require_same_tree(gpu, source);
  }
}

TEST_CASE("a leaf file that shrank after the save fails a GPU load with CorruptData naming it, read by any chunk") {
  const ScratchDir scratch;
  TensorTree tree(Shape{4});
  for (int i = 0; i < 64; ++i) tree.set(Path{"leaf_" + std::to_string(i)}, patterned({4, 4096}, DType::Float32, i + 1));
  tree.memmap_(scratch / "t", {.durable = false});
  const std::filesystem::path shrunk = scratch / "t" / "leaf_40.memmap";
  REQUIRE(std::filesystem::is_regular_file(shrunk));
  std::filesystem::resize_file(shrunk, 1000);
  // Small chunks: many reads in flight when the one over the shrunk file fails.
  for (const std::size_t staging : {std::size_t{4096}, std::size_t{64} << 10}) {
    INFO("staging " << staging);
    try {
      (void)TensorTree::load_memmap(scratch / "t", {.device = kGpu, .staging_bytes = staging});
      FAIL("the load succeeded");
    } catch (const CorruptData& e) {
      CHECK_THAT(e.what(), Catch::Contains("leaf_40"));
    }
  }
}

TEST_CASE("memmap_ of a CUDA tree writes the files the CPU tree writes") {
  const ScratchDir scratch;
  TensorTree cpu = mixed_tree();
  TensorTree gpu = cpu.to(kGpu);
  cpu.memmap_(scratch / "cpu");
  gpu.memmap_(scratch / "gpu");
  CHECK(gpu.get(Path{"next", "reward"}).device() == Device::cpu());  // the leaves now view the files
  for (const auto& [path, leaf] : cpu.leaves()) {
    INFO(path_str(path));
    const auto cpu_leaf = TensorTree::load_memmap(scratch / "cpu").get(path);
    CHECK(bytes_of(TensorTree::load_memmap(scratch / "gpu").get(path)) == bytes_of(cpu_leaf));
  }
  CHECK(read_text(scratch / "cpu" / "meta.json") == read_text(scratch / "gpu" / "meta.json"));
}

TEST_CASE("host-to-device throughput of a 512 MiB memmap load") {
  const ScratchDir scratch;
  TensorTree tree(Shape{512}, {{"frames", Tensor::arange({512, 1 << 20}, 1, 1, {DType::UInt8})}});
  tree.memmap_(scratch / "big", {.durable = false});
  (void)TensorTree::load_memmap(scratch / "big", {.device = kGpu});  // warm: the page cache and the CUDA context
  const auto start = std::chrono::steady_clock::now();
  const TensorTree gpu = TensorTree::load_memmap(scratch / "big", {.device = kGpu});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("load_memmap of 512 MiB onto " << kGpu.str() << ": " << 512.0 / 1024 / seconds << " GB/s (page cache -> pinned -> device)");
  const Tensor host = gpu.get("frames").to(Device::cpu());
  const auto* data = static_cast<const std::uint8_t*>(host.data_ptr());
  for (std::int64_t i = 0; i < host.numel(); i += 4099) REQUIRE(data[i] == static_cast<std::uint8_t>(1 + i));
}
