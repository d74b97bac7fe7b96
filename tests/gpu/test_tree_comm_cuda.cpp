// TensorTree's collectives on CUDA trees, at world size 1 (one process, MPI as a singleton, NCCL
// for the data): the tree consolidates on the GPU, moves with one NCCL call (one per dtype bucket
// for reductions), and arrives intact. Two ranks on one GPU need NCCL 2.30 (see tests/dist).
#include <catch2/catch.hpp>

#include "tensortree/config.hpp"

// Groups come from MPI; elsewhere this file has no test cases.
#if TT_HAVE_MPI

#include <vector>

#include "tensortree/dist_context.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;

namespace {

const Device kGpu = Device::cuda(0);

const DistributedContext& context() {
  static DistributedContext ctx;
  return ctx;
}

// Mixed dtypes, nesting and a strided leaf, non-zero values that differ from leaf to leaf.
TensorTree make_tree(Device device, double start) {
  TensorTree tree(Shape{4});
  tree.set("obs", Tensor::arange({4, 3, 8, 8}, start, 1, {DType::UInt8, device}));
  tree.set("action", Tensor::arange({4}, start + 7, 3, {DType::Int64, device}));
  tree.set("next.reward", Tensor::arange({4}, start + 0.5, 0.25, {DType::Float32, device}));
  tree.set("info.return", Tensor::arange({4, 2}, start + 100, 1, {DType::Float64, device}));
  tree.set("info.transposed", Tensor::arange({5, 4}, start + 40, 1, {DType::Float32, device}).transpose(0, 1));
  return tree;
}

}  // namespace

TEST_CASE("a CUDA tree all_reduces on the GPU, bucket by bucket, in place") {
  const Group& world = context().world();
  TensorTree tree = make_tree(kGpu, 3).consolidate();
  const StoragePtr before = tree.storage();
  tree.all_reduce(world, ReduceOp::Max);  // one rank: every value stays as it was
  CHECK(tree.storage() == before);
  CHECK(tree.to(Device::cpu()).equal(make_tree(Device::cpu(), 3)));
  TensorTree plain = make_tree(kGpu, 5);
  plain.all_reduce(world, ReduceOp::Sum);
  CHECK(plain.to(Device::cpu()).equal(make_tree(Device::cpu(), 5)));
}

TEST_CASE("a CUDA tree broadcast, gathered and scattered arrives on the GPU intact") {
  const Group& world = context().world();
  TensorTree root = make_tree(kGpu, 11);
  root.broadcast(0, world);
  CHECK(root.to(Device::cpu()).equal(make_tree(Device::cpu(), 11)));

  const std::vector<TensorTree> gathered = make_tree(kGpu, 13).all_gather(world);
  REQUIRE(gathered.size() == 1);
  CHECK(gathered[0].device() == kGpu);
  CHECK(gathered[0].to(Device::cpu()).equal(make_tree(Device::cpu(), 13)));

  const std::vector<TensorTree> at_root = make_tree(kGpu, 17).gather(0, world);
  REQUIRE(at_root.size() == 1);
  CHECK(at_root[0].to(Device::cpu()).equal(make_tree(Device::cpu(), 17)));

  const std::vector<TensorTree> parts{make_tree(kGpu, 19)};
  TensorTree mine;
  mine.scatter(0, parts, world);
  CHECK(mine.device() == kGpu);
  CHECK(mine.to(Device::cpu()).equal(make_tree(Device::cpu(), 19)));
}

#endif  // TT_HAVE_MPI
