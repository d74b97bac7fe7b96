// TensorDict's tree API on CUDA leaves: the views stay on the device, the element-wise methods go
// through host memory and return device tensors, to(cuda, non_blocking) completes through its Work,
// share_memory_ refuses device memory. Values are checked on the host, element by element.
#include <catch2/catch.hpp>

#include <cstdint>

#include "tensortree/device.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/work.hpp"

using namespace tensortree;

namespace {

const Device kGpu = Device::cuda(0);

// batch_size [2, 3]; obs(i, j, k) = 1 + 12 i + 4 j + k.
TensorTree host_tree() {
  TensorTree tree({2, 3});
  tree.set("obs", Tensor::arange({2, 3, 4}, 1));
  tree.set("next.reward", Tensor::arange({2, 3}, 100, 1, {DType::Int64}));
  return tree;
}

Tensor host_mask() {
  Tensor mask = Tensor::empty({2, 3}, {DType::Bool});
  const bool values[6] = {true, false, true, false, false, true};
  for (int n = 0; n < 6; ++n) mask.data<bool>()[n] = values[n];
  return mask;
}

}  // namespace

TEST_CASE("to(cuda, non_blocking) copies every leaf once its Work completes") {
  const TensorTree host = host_tree();
  auto [gpu, work] = host.to(kGpu, true);
  work->wait();
  REQUIRE(gpu.get("obs").device() == kGpu);
  CHECK(gpu.to(Device::cpu()).equal(host));
  const TensorTree pinned = host.pin_memory();
  CHECK(pinned.get("obs").storage()->is_pinned());
  CHECK(pinned.equal(host));
}

TEST_CASE("batch views of CUDA leaves stay on the device and hold the same elements") {
  const TensorTree host = host_tree();
  const TensorTree gpu = host.to(kGpu);
  const TensorTree permuted = gpu.permute({1, 0});
  CHECK(permuted.get("obs").device() == kGpu);
  CHECK(permuted.to(Device::cpu()).equal(host.permute({1, 0})));
  CHECK(gpu.reshape({6}).to(Device::cpu()).equal(host.reshape({6})));
  CHECK(gpu.expand({2, 2, 3}).to(Device::cpu()).equal(host.expand({2, 2, 3})));
}

TEST_CASE("masked_select, where, masked_fill_ and sum on CUDA leaves match the CPU results") {
  const TensorTree host = host_tree();
  const TensorTree gpu = host.to(kGpu);
  const Tensor mask = host_mask();
  CHECK(gpu.masked_select(mask).to(Device::cpu()).equal(host.masked_select(mask)));
  const TensorTree other = host.apply([](const Tensor& leaf) { return Tensor::full(leaf.shape(), -3, {leaf.dtype()}); });
  const TensorTree picked = gpu.where(mask, other.to(kGpu));
  CHECK(picked.get("obs").device() == kGpu);
  CHECK(picked.to(Device::cpu()).equal(host.where(mask, other)));
  CHECK(gpu.sum(1).to(Device::cpu()).equal(host.sum(1)));
  const TensorTree filled = host.clone();
  filled.masked_fill_(mask, 7);
  gpu.masked_fill_(mask, 7);
  CHECK(gpu.to(Device::cpu()).equal(filled));
  TensorTree on_device = host.to(kGpu);
  CHECK_THROWS_AS(on_device.share_memory_(), NotSupported);
}
