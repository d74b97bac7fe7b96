// consolidate(), from_consolidated() and unpack_from() on the GPU: one pack kernel launch for any
// number of leaves, strided leaves included, and the CPU <-> GPU paths.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/work.hpp"

using namespace tensortree;

namespace {

const Device kGpu = Device::cuda(0);

// Every dtype, strided and zero-size leaves, nesting, on `device`.
TensorTree make_tree(Device device, double start = 1.0) {
  TensorTree tree(Shape{4});
  double next = start;
  for (DType dtype : kAllDTypes) {
    tree.set({"dtypes", std::string(dtype_name(dtype))}, Tensor::arange({4, 5}, next, 1, {dtype, device}));
    next += 20;
  }
  tree.set("transposed", Tensor::arange({7, 4}, next, 1, {DType::Float32, device}).transpose(0, 1));
  tree.set("stepped", Tensor::arange({4, 11}, next + 50, 1, {DType::Int64, device}).slice(1, {2, 11, 4}));
  tree.set("empty", Tensor::empty({4, 0}, {DType::Float64, device}));
  // Larger than one 64 KiB kernel chunk, so one leaf spans several blocks.
  tree.set({"deep", "a", "b", "big"}, Tensor::arange({4, 50000}, next + 100, 1, {DType::Float32, device}));
  return tree;
}

std::vector<std::byte> host_bytes(const TensorTree& packed) {
  const auto total = static_cast<std::int64_t>(packed.schema()->total_bytes());
  const Tensor bytes(packed.storage(), 0, DType::UInt8, {total}, {1});
  const Tensor host = bytes.to(Device::cpu());
  const auto* data = static_cast<const std::byte*>(host.data_ptr());
  return {data, data + total};
}

}  // namespace

TEST_CASE("a CUDA tree packs on the GPU into the same bytes as the CPU tree") {
  const TensorTree gpu_tree = make_tree(kGpu);
  const TensorTree packed = gpu_tree.consolidate();
  REQUIRE(packed.storage()->device() == kGpu);
  CHECK(packed.schema()->storage_device() == DeviceType::CUDA);
  CHECK(packed.equal(gpu_tree));
  CHECK(host_bytes(packed) == host_bytes(make_tree(Device::cpu()).consolidate()));
  CHECK(TensorTree::from_consolidated(packed.storage(), packed.schema()).equal(gpu_tree));
}

TEST_CASE("GPU packing zeroes the padding of a dirty reused buffer") {
  const TensorTree tree = make_tree(kGpu);
  const std::uint64_t total = tree.consolidate().schema()->total_bytes();
  const StoragePtr dirty = Storage::allocate(total, kGpu);
  Tensor(dirty, 0, DType::UInt8, {static_cast<std::int64_t>(total)}, {1}).fill_(0xab);
  const TensorTree packed = tree.consolidate({.reuse = dirty});
  REQUIRE(packed.storage() == dirty);
  CHECK(host_bytes(packed) == host_bytes(make_tree(Device::cpu()).consolidate()));
}

TEST_CASE("unpack_from on the GPU writes into strided CUDA leaves") {
  const TensorTree target = make_tree(kGpu, 1.0);
  const TensorTree source = make_tree(kGpu, 2.0).consolidate();
  REQUIRE_FALSE(target.equal(source));
  target.unpack_from(*source.storage(), *source.schema());
  CHECK(target.equal(source));
}

TEST_CASE("CPU trees consolidate onto the GPU and GPU trees onto the CPU") {
  const TensorTree cpu_tree = make_tree(Device::cpu());
  const TensorTree up = cpu_tree.consolidate({.device = kGpu});
  CHECK(up.storage()->device() == kGpu);
  CHECK(up.equal(cpu_tree));
  const TensorTree down = make_tree(kGpu).consolidate({.device = Device::cpu(), .pinned = true});
  CHECK(down.storage()->is_pinned());
  CHECK(down.equal(cpu_tree));
}

TEST_CASE("ten thousand tiny CUDA leaves pack in one pass") {
  TensorTree tree(Shape{2});
  for (int i = 0; i < 10000; ++i) {
    std::string group = "g";  // appended, not operator+: GCC 12 warns falsely there (PR105651)
    group += std::to_string(i / 100);
    std::string leaf = "l";
    leaf += std::to_string(i);
    tree.set({group, leaf},
             Tensor::arange({2, 3}, i * 10.0 + 1, 1, {i % 2 ? DType::Int32 : DType::Float32, kGpu}));
  }
  const TensorTree packed = tree.consolidate();
  CHECK(packed.equal(tree));
}

TEST_CASE("consolidate_async packs a CUDA tree behind the caller, with descriptors inline or uploaded") {
  // make_tree's descriptors fit the kernel's parameters; a thousand leaves' are uploaded.
  TensorTree many(Shape{2});
  for (int i = 0; i < 1000; ++i) {
    many.set("leaf_" + std::to_string(i), Tensor::arange({2, 3}, 10.0 * i, 1, {DType::Float32, kGpu}));
  }
  for (const TensorTree& source : {make_tree(kGpu), many}) {
    auto [packed, work] = source.consolidate_async();
    REQUIRE(packed.storage()->device() == kGpu);
    work->wait();
    CHECK(work->is_completed());
    CHECK(packed.equal(source));
    CHECK(host_bytes(packed) == host_bytes(source.consolidate()));
  }
}

TEST_CASE("a consolidate_async result is ordered before the library's next device work, and a stream can wait for it") {
  const TensorTree source = make_tree(kGpu, 3.0);
  auto [packed, work] = source.consolidate_async();
  // A device-to-device copy on the legacy default stream, queued at once: it sees the packed bytes.
  const TensorTree copied = packed.clone();
  work->make_stream_wait();
  CHECK(copied.equal(source));
  CHECK(packed.equal(source));
}

TEST_CASE("consolidate_async keeps the source's leaves alive until its kernel has read them") {
  const auto tree_of = [](int leaves) {
    TensorTree tree(Shape{2});
    for (int i = 0; i < leaves; ++i) {
      tree.set("leaf_" + std::to_string(i), Tensor::arange({2, 3}, 10.0 * i + 1, 1, {DType::Float32, kGpu}));
    }
    return tree;
  };
  // Inline descriptors, and uploaded ones.
  for (const int leaves : {4, 1000}) {
    INFO(leaves << " leaves");
    // The source and every handle on its leaves are gone when the call returns.
    TreeTransfer transfer = tree_of(leaves).consolidate_async();
    transfer.work->wait();
    CHECK(transfer.tree.equal(tree_of(leaves)));
  }
}
