// Element-wise arithmetic on CUDA tensors (cuda_elementwise.cu) against the same operations on the
// CPU, which test_tensor_arith.cpp checks against values worked out by hand: every dtype the
// kernels compute, broadcast and transposed operands, scalars, in-place forms, casts and trees.
#include <catch2/catch.hpp>

#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;

namespace {

const Device kGpu = Device::cuda(0);

const std::vector<DType> kKernelDTypes = {DType::Bool,  DType::UInt8,   DType::UInt16,   DType::UInt32, DType::UInt64,
                                          DType::Int8,  DType::Int16,   DType::Int32,    DType::Int64,  DType::Float16,
                                          DType::BFloat16, DType::Float32, DType::Float64};

// The GPU result, brought back, holds what the CPU computed (exactly, or within float rounding for
// the transcendental functions).
void require_same(const Tensor& on_gpu, const Tensor& on_cpu, bool exact = true) {
  REQUIRE(on_gpu.device() == kGpu);
  const Tensor back = on_gpu.to(Device::cpu());
  REQUIRE(back.dtype() == on_cpu.dtype());
  REQUIRE(back.shape() == on_cpu.shape());
  if (exact) {
    REQUIRE(back.equal(on_cpu));
  } else {
    REQUIRE(back.allclose(on_cpu, 1e-5, 1e-6));
  }
}

// Non-zero values that stay in range for every dtype: 1..12 in a [3, 4] tensor.
Tensor values(DType dtype, double start = 1) { return Tensor::arange({3, 4}, start, 1, {dtype}); }

}  // namespace

TEST_CASE("binary operations and comparisons on the GPU match the CPU for every kernel dtype") {
  for (const DType dtype : kKernelDTypes) {
    INFO("dtype " << dtype);
    const Tensor a = values(dtype);
    const Tensor b = values(dtype, 2).transpose(0, 1).contiguous().transpose(0, 1);  // strided, same shape
    const Tensor ga = a.to(kGpu);
    const Tensor gb = b.to(kGpu);
    require_same(ga + gb, a + b);
    require_same(ga * gb, a * b);
    require_same(ga / gb, a / b);
    if (dtype != DType::Bool) require_same(gb - ga, b - a);
    require_same(ga < gb, a < b);
    require_same(ga == gb, a == b);
    require_same(ga * 2.5, a * 2.5);
    require_same(10 - ga, 10 - a);
    require_same(ga.ge(6), a.ge(6));
  }
}

TEST_CASE("broadcast, transposed and mixed-dtype operands on the GPU match the CPU") {
  const Tensor m = Tensor::arange({4, 3}, 1, 1, {DType::Float32});
  const Tensor row = Tensor::arange({3}, 10, 10, {DType::Int64});
  const Tensor col = Tensor::arange({4, 1}, 100, 1, {DType::UInt8});
  require_same(m.to(kGpu) + row.to(kGpu), m + row);
  require_same(col.to(kGpu) * row.to(kGpu), col * row);
  const Tensor n = m * 3;
  require_same(m.to(kGpu).transpose(0, 1) - n.to(kGpu).transpose(0, 1), m.transpose(0, 1) - n.transpose(0, 1));
  require_same(Tensor::arange({3, 4}, 1, 1, {DType::Float16}).to(kGpu) + m.transpose(0, 1).to(kGpu).to(DType::BFloat16),
               Tensor::arange({3, 4}, 1, 1, {DType::Float16}) + m.transpose(0, 1).to(DType::BFloat16));
}

TEST_CASE("unary functions, clamp and casts on the GPU match the CPU") {
  for (const DType dtype : kKernelDTypes) {
    INFO("dtype " << dtype);
    const Tensor a = values(dtype);
    const Tensor ga = a.to(kGpu);
    if (dtype != DType::Bool) {
      require_same(ga.neg(), a.neg());
      require_same(ga.abs(), a.abs());
    }
    require_same(ga.sqrt(), a.sqrt(), false);
    require_same(ga.exp(), a.exp(), false);
    require_same(ga.log(), a.log(), false);
    require_same(ga.clamp(3, 7), a.clamp(3, 7));
    for (const DType to : kKernelDTypes) {
      INFO("to " << to);
      require_same((ga - 6.5).to(to), (a - 6.5).to(to));
    }
  }
}

TEST_CASE("in-place forms on the GPU write into the device tensor and refuse as on the CPU") {
  const Tensor a = values(DType::Float32);
  const Tensor ga = a.clone().to(kGpu);
  ga += values(DType::Int32).to(kGpu);
  ga.mul_(0.5);
  require_same(ga, (a + values(DType::Int32)) * 0.5);
  const Tensor gi = values(DType::Int64).to(kGpu);
  CHECK_THROWS_AS(gi += 0.5, InvalidArgument);
  CHECK_THROWS_AS(ga + values(DType::Float32), InvalidArgument);  // cuda:0 and cpu
}

TEST_CASE("complex and float8 tensors on the GPU, computed through host memory, match the CPU") {
  const Tensor c = values(DType::Complex64);
  require_same(c.to(kGpu) * c.to(kGpu), c * c);
  require_same(c.to(kGpu).abs(), c.abs());
  require_same(c.to(kGpu).to(DType::Float64), c.to(DType::Float64));
  const Tensor f8 = values(DType::Float8_e5m2);
  require_same(f8.to(kGpu) * 2, f8 * 2);
  require_same(f8.to(kGpu).to(DType::Float32), f8.to(DType::Float32));
}

TEST_CASE("tree arithmetic on GPU leaves matches the CPU") {
  const TensorTree cpu = TensorTree::from_map({3}, {{"obs", values(DType::Float32)}, {"r", values(DType::Int64)}});
  const TensorTree gpu = cpu.to(kGpu);
  const TensorTree out = (gpu * 2 + gpu).to(DType::Float64);
  const TensorTree expected = (cpu * 2 + cpu).to(DType::Float64);
  require_same(out.get("obs"), expected.get("obs"));
  require_same(out.get("r"), expected.get("r"));
}
