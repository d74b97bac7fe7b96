// The Tensor's CUDA paths: host <-> device copies, the strided copy kernel behind contiguous()
// and copy_ into views, equal() on device tensors, and pinned host memory.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>

#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;

namespace {

const Device kGpu = Device::cuda(0);

// Element `linear` (C order) of a tensor made by Tensor::arange(shape, start, 1).
double arange_value(double start, std::int64_t linear) { return start + static_cast<double>(linear); }

void require_on_gpu(const Tensor& tensor) {
  REQUIRE(tensor.device() == kGpu);
  REQUIRE(tensor.storage()->kind() == MemoryKind::Device);
}

}  // namespace

TEST_CASE("to(cuda:0) and back to the CPU keeps every element of every dtype") {
  for (DType dtype : kAllDTypes) {
    INFO("dtype " << dtype);
    const Tensor original = Tensor::arange({5, 7}, 1.0, 1.0, {.dtype = dtype});
    const Tensor on_gpu = original.to(kGpu);
    require_on_gpu(on_gpu);
    const Tensor back = on_gpu.to(Device::cpu());
    REQUIRE(back.device() == Device::cpu());
    REQUIRE(back.storage() != original.storage());
    REQUIRE(back.shape() == original.shape());
    for (std::int64_t i = 0; i < original.numel(); ++i) {
      INFO("element " << i);
      REQUIRE(original.value_at_linear(i) != 0.0);
      REQUIRE(back.value_at_linear(i) == original.value_at_linear(i));
    }
  }
}

TEST_CASE("contiguous() of a CUDA view sliced with steps holds exactly the selected elements") {
  constexpr std::int64_t kCols = 10;
  const Tensor on_gpu = Tensor::arange({6, kCols}, 1.0, 1.0, {.dtype = DType::Float32, .device = kGpu});
  const Tensor every_other_row_third_col = on_gpu.slice(0, {0, 6, 2}).slice(1, {1, kCols, 3});
  REQUIRE_FALSE(every_other_row_third_col.is_contiguous());

  const Tensor packed = every_other_row_third_col.contiguous();
  require_on_gpu(packed);
  REQUIRE(packed.is_contiguous());
  REQUIRE(packed.shape() == Shape{3, 3});
  const Tensor back = packed.to(Device::cpu());
  for (std::int64_t row = 0; row < 3; ++row) {
    for (std::int64_t col = 0; col < 3; ++col) {
      INFO("row " << row << " col " << col);
      REQUIRE(back.at<float>({row, col}) == arange_value(1.0, 2 * row * kCols + 1 + 3 * col));
    }
  }
}

TEST_CASE("contiguous() of a permuted CUDA tensor reorders every element, for each element size") {
  // One dtype per word size the strided copy kernel moves: 1, 2, 4, 8 and 16 bytes.
  constexpr std::array kDTypes = {DType::UInt8, DType::Int16, DType::Float32, DType::Int64,
                                  DType::Complex128};
  for (DType dtype : kDTypes) {
    INFO("dtype " << dtype);
    const Tensor on_gpu = Tensor::arange({3, 4, 5}, 1.0, 1.0, {.dtype = dtype, .device = kGpu});
    const Tensor permuted = on_gpu.permute({2, 0, 1});  // view(a, b, c) = original(b, c, a)
    REQUIRE_FALSE(permuted.is_contiguous());
    const Tensor packed = permuted.contiguous();
    require_on_gpu(packed);
    const Tensor back = packed.to(Device::cpu());
    REQUIRE(back.shape() == Shape{5, 3, 4});
    for (std::int64_t a = 0; a < 5; ++a) {
      for (std::int64_t b = 0; b < 3; ++b) {
        for (std::int64_t c = 0; c < 4; ++c) {
          INFO("view index (" << a << ", " << b << ", " << c << ")");
          const std::int64_t linear = (a * 3 + b) * 4 + c;
          REQUIRE(back.value_at_linear(linear).real() == arange_value(1.0, b * 20 + c * 5 + a));
        }
      }
    }
  }
}

TEST_CASE("contiguous() of a transposed CUDA matrix equals the CPU transpose") {
  const Tensor on_cpu = Tensor::arange({7, 9}, -30.0, 1.0, {.dtype = DType::Float64});
  const Tensor packed = on_cpu.to(kGpu).transpose(0, 1).contiguous();
  require_on_gpu(packed);
  const Tensor back = packed.to(Device::cpu());
  for (std::int64_t i = 0; i < 9; ++i) {
    for (std::int64_t j = 0; j < 7; ++j) {
      INFO("element (" << i << ", " << j << ")");
      REQUIRE(back.at<double>({i, j}) == on_cpu.at<double>({j, i}));
    }
  }
}

TEST_CASE("copy_ from the CPU into a strided CUDA view writes only the view's elements") {
  const Tensor target = Tensor::full({4, 6}, -1.0, {.dtype = DType::Int32, .device = kGpu});
  const Tensor even_columns = target.slice(1, {0, 6, 2});
  REQUIRE_FALSE(even_columns.is_contiguous());
  even_columns.copy_(Tensor::arange({4, 3}, 100.0, 1.0, {.dtype = DType::Int32}));

  const Tensor back = target.to(Device::cpu());
  for (std::int64_t row = 0; row < 4; ++row) {
    for (std::int64_t col = 0; col < 6; ++col) {
      INFO("row " << row << " col " << col);
      const std::int32_t expected = col % 2 == 0 ? 100 + static_cast<std::int32_t>(row * 3 + col / 2) : -1;
      REQUIRE(back.at<std::int32_t>({row, col}) == expected);
    }
  }
}

TEST_CASE("copy_ from a transposed CPU tensor into a CUDA tensor lands in view order") {
  const Tensor source = Tensor::arange({5, 3}, 11.0, 1.0, {.dtype = DType::Int64}).transpose(0, 1);
  const Tensor target = Tensor::zeros({3, 5}, {.dtype = DType::Int64, .device = kGpu});
  target.copy_(source);
  const Tensor back = target.to(Device::cpu());
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 5; ++j) {
      INFO("element (" << i << ", " << j << ")");
      REQUIRE(back.at<std::int64_t>({i, j}) == 11 + j * 3 + i);
    }
  }
}

TEST_CASE("equal() on CUDA tensors compares values, and sees a single changed element") {
  const Tensor a = Tensor::arange({4, 8}, 1.0, 0.5, {.dtype = DType::Float32, .device = kGpu});
  const Tensor b = Tensor::arange({4, 8}, 1.0, 0.5, {.dtype = DType::Float32}).to(kGpu);
  REQUIRE(a.storage() != b.storage());
  CHECK(a.equal(b));
  CHECK(a.equal(a.to(Device::cpu())));

  b.slice(0, {2, 3}).slice(1, {5, 6}).fill_(-7.0);
  CHECK_FALSE(a.equal(b));
  CHECK_FALSE(b.equal(a));
  CHECK_FALSE(a.equal(Tensor::arange({4, 8}, 1.0, 0.5, {.dtype = DType::Float64, .device = kGpu})));
}

TEST_CASE("a pinned host tensor is page-locked CPU memory that round-trips through the GPU") {
  const Tensor pinned =
      Tensor::arange({1000}, 3.0, 2.0, {.dtype = DType::Float64, .pinned = true});
  REQUIRE(pinned.device() == Device::cpu());
  REQUIRE(pinned.storage()->is_pinned());

  const Tensor on_gpu = pinned.to(kGpu);
  require_on_gpu(on_gpu);
  const Tensor landing = Tensor::zeros({1000}, {.dtype = DType::Float64, .pinned = true});
  REQUIRE(landing.storage()->is_pinned());
  landing.copy_(on_gpu);
  for (std::int64_t i = 0; i < 1000; ++i) {
    INFO("element " << i);
    REQUIRE(landing.at<double>({i}) == 3.0 + 2.0 * static_cast<double>(i));
  }
}
