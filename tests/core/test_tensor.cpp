#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tensortree/config.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

Tensor int64_range(Shape shape) { return Tensor::arange(std::move(shape), 1, 1, {DType::Int64}); }

// Checks every element of `t`, in C order, against `expected`.
void check_values(const Tensor& t, const std::vector<double>& expected) {
  REQUIRE(t.numel() == static_cast<std::int64_t>(expected.size()));
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    INFO("element " << i << " of " << t.str());
    CHECK(t.value_at_linear(i) == std::complex<double>(expected[static_cast<std::size_t>(i)], 0.0));
  }
}

std::vector<double> counting(int first, int last) {
  std::vector<double> values;
  for (int v = first; v <= last; ++v) values.push_back(v);
  return values;
}

}  // namespace

// ---- factories --------------------------------------------------------------------------------

TEST_CASE("empty gives the requested shape, dtype, C-order strides and 64-byte aligned memory") {
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    const Tensor t = Tensor::empty({2, 3, 4}, {dtype});
    CHECK(t.defined());
    CHECK(t.dtype() == dtype);
    CHECK(t.shape() == Shape{2, 3, 4});
    CHECK(t.strides() == Strides{12, 4, 1});
    CHECK(t.numel() == 24);
    CHECK(t.nbytes() == 24 * itemsize(dtype));
    CHECK(t.storage()->nbytes() == t.nbytes());
    CHECK(t.device() == Device::cpu());
    CHECK(t.is_contiguous());
    CHECK(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64 == 0);
  }
}

TEST_CASE("zeros and full set every element, for every dtype") {
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    check_values(Tensor::zeros({2, 3}, {dtype}), std::vector<double>(6, 0.0));
    const double expected = dtype == DType::Bool ? 1.0 : 3.0;
    check_values(Tensor::full({3, 2}, 3.0, {dtype}), std::vector<double>(6, expected));
  }
}

TEST_CASE("arange holds start + i * step in C order, for every dtype") {
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    const Tensor t = Tensor::arange({2, 3}, 1, 1, {dtype});
    CHECK(t.shape() == Shape{2, 3});
    check_values(t, dtype == DType::Bool ? std::vector<double>(6, 1.0) : counting(1, 6));
  }
  check_values(Tensor::arange({4}, 0.5, 0.25, {DType::Float64}), {0.5, 0.75, 1.0, 1.25});
  check_values(Tensor::arange({3}, -2, -3, {DType::Int8}), {-2, -5, -8});
}

TEST_CASE("arange and full keep 64-bit integers exact") {
  const Tensor t = Tensor::arange({2}, 9007199254740992.0, 2, {DType::Int64});  // 2^53
  CHECK(t.at<std::int64_t>({0}) == 9007199254740992);
  CHECK(t.at<std::int64_t>({1}) == 9007199254740994);
  CHECK(Tensor::full({1}, 18446744073709549568.0, {DType::UInt64}).at<std::uint64_t>({0}) ==
        18446744073709549568u);
}

TEST_CASE("integer conversion wraps like a two's-complement cast and rejects NaN") {
  CHECK(Tensor::full({1}, -1, {DType::UInt8}).at<std::uint8_t>({0}) == 255);
  CHECK(Tensor::full({1}, -1, {DType::UInt64}).at<std::uint64_t>({0}) ==
        std::numeric_limits<std::uint64_t>::max());
  CHECK(Tensor::full({1}, 2.75, {DType::Int32}).at<std::int32_t>({0}) == 2);
  check_values(Tensor::arange({3}, 254, 1, {DType::UInt8}), {254, 255, 0});
  REQUIRE_THROWS_AS(Tensor::full({1}, NAN, {DType::Int32}), InvalidArgument);
  REQUIRE_THROWS_WITH(Tensor::full({1}, 1e30, {DType::Int64}), Catch::Contains("int64"));
}

TEST_CASE("a zero-dimensional tensor holds one element") {
  const Tensor t = Tensor::full({}, 7.5, {DType::Float32});
  CHECK(t.dim() == 0);
  CHECK(t.numel() == 1);
  CHECK(t.is_contiguous());
  CHECK(t.at<float>({}) == 7.5f);
  CHECK(t.clone().at<float>({}) == 7.5f);
}

TEST_CASE("factories reject negative dimensions and sizes that overflow") {
  REQUIRE_THROWS_AS(Tensor::empty({2, -1}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::empty({std::int64_t{1} << 40, std::int64_t{1} << 40}), InvalidArgument);
  REQUIRE_THROWS_WITH(Tensor::empty({std::int64_t{1} << 61}, {DType::Complex128}),
                      Catch::Contains("complex128") && Catch::Contains("[2305843009213693952]"));
}

TEST_CASE("an empty tensor has no elements and copies as a no-op") {
  const Tensor t = Tensor::empty({3, 0, 2});
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.is_contiguous());
  CHECK(t.clone().shape() == Shape{3, 0, 2});
  CHECK(t.equal(Tensor::zeros({3, 0, 2})));
}

// ---- views ------------------------------------------------------------------------------------

TEST_CASE("slice takes every step-th element and clamps negative and oversized bounds") {
  const Tensor t = int64_range({10});  // 1..10
  check_values(t.slice(0, {1, 8, 3}), {2, 5, 8});
  check_values(t.slice(0, {-4, -1}), {7, 8, 9});
  check_values(t.slice(0, {-100, 100, 4}), {1, 5, 9});
  check_values(t.slice(0, {7, kInt64Max}), {8, 9, 10});
  check_values(t.slice(0, {2, 10, kInt64Max}), {3});
  CHECK(t.slice(0, {6, 2}).numel() == 0);
  CHECK(t.slice(0, {1, 8, 3}).strides() == Strides{3});
  CHECK(t.slice(0, {1, 8, 3}).storage() == t.storage());
  REQUIRE_THROWS_WITH(t.slice(0, {0, 5, 0}), Catch::Contains("step") && Catch::Contains("0"));
  REQUIRE_THROWS_AS(t.slice(1, {0, 5}), InvalidArgument);
}

TEST_CASE("slice along the last dimension of a matrix, with a step") {
  const Tensor t = int64_range({3, 5});
  const Tensor s = t.slice(-1, {0, 5, 2});
  CHECK(s.shape() == Shape{3, 3});
  CHECK(s.strides() == Strides{5, 2});
  check_values(s, {1, 3, 5, 6, 8, 10, 11, 13, 15});
}

TEST_CASE("narrow views a range and rejects ranges outside the dimension") {
  const Tensor t = int64_range({3, 4});
  check_values(t.narrow(1, 1, 2), {2, 3, 6, 7, 10, 11});
  check_values(t.narrow(0, 2, 1), {9, 10, 11, 12});
  CHECK(t.narrow(0, 3, 0).numel() == 0);
  REQUIRE_THROWS_WITH(t.narrow(1, 3, 2), Catch::Contains("narrow(3, 2)") && Catch::Contains("size 4"));
  REQUIRE_THROWS_AS(t.narrow(1, -1, 2), InvalidArgument);
  REQUIRE_THROWS_AS(t.narrow(1, kInt64Max, 1), InvalidArgument);
  REQUIRE_THROWS_AS(t.narrow(1, 1, kInt64Max), InvalidArgument);
}

TEST_CASE("select removes a dimension, counting negative indices from the end") {
  const Tensor t = int64_range({2, 3, 4});
  const Tensor s = t.select(1, -1);
  CHECK(s.shape() == Shape{2, 4});
  check_values(s, {9, 10, 11, 12, 21, 22, 23, 24});
  check_values(t.select(0, 1).select(0, 0), {13, 14, 15, 16});
  REQUIRE_THROWS_WITH(t.select(1, 3), Catch::Contains("select index 3") && Catch::Contains("size 3"));
  REQUIRE_THROWS_AS(t.select(1, -4), InvalidArgument);
  REQUIRE_THROWS_AS(t.select(3, 0), InvalidArgument);
}

TEST_CASE("transpose swaps shape and strides; contiguous() then lays out the transposed order") {
  const Tensor t = int64_range({2, 3});
  const Tensor tt = t.transpose(0, 1);
  CHECK(tt.shape() == Shape{3, 2});
  CHECK(tt.strides() == Strides{1, 3});
  CHECK_FALSE(tt.is_contiguous());
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 2; ++j) CHECK(tt.at<std::int64_t>({i, j}) == t.at<std::int64_t>({j, i}));
  }
  const Tensor dense = tt.contiguous();
  CHECK(dense.is_contiguous());
  CHECK(dense.strides() == Strides{2, 1});
  check_values(dense, {1, 4, 2, 5, 3, 6});
  check_values(t.transpose(-1, 0).contiguous(), {1, 4, 2, 5, 3, 6});
}

TEST_CASE("a 4-D permute made contiguous matches the permuted index element by element") {
  const Tensor t = int64_range({2, 3, 4, 5});
  const Tensor p = t.permute({2, 0, 3, 1});  // p[a][b][c][d] = t[b][d][a][c]
  CHECK(p.shape() == Shape{4, 2, 5, 3});
  CHECK(p.strides() == Strides{5, 60, 1, 20});
  const Tensor dense = p.contiguous();
  REQUIRE(dense.is_contiguous());
  const auto* values = dense.data<std::int64_t>();
  std::int64_t linear = 0;
  for (std::int64_t a = 0; a < 4; ++a) {
    for (std::int64_t b = 0; b < 2; ++b) {
      for (std::int64_t c = 0; c < 5; ++c) {
        for (std::int64_t d = 0; d < 3; ++d) {
          INFO("p[" << a << "][" << b << "][" << c << "][" << d << "]");
          CHECK(values[linear++] == 1 + ((b * 3 + d) * 4 + a) * 5 + c);
        }
      }
    }
  }
}

TEST_CASE("permute rejects a wrong number of dimensions and repeated dimensions") {
  const Tensor t = int64_range({2, 3, 4});
  REQUIRE_THROWS_AS(t.permute({0, 1}), InvalidArgument);
  REQUIRE_THROWS_WITH(t.permute({0, 1, -3}), Catch::Contains("repeats"));
  REQUIRE_THROWS_AS(t.permute({0, 1, 3}), InvalidArgument);
}

TEST_CASE("a strided slice of a matrix made contiguous holds exactly the selected elements") {
  const Tensor t = int64_range({6, 8});
  const Tensor s = t.slice(0, {1, 6, 2}).slice(1, {0, 8, 3});  // rows 1, 3, 5; columns 0, 3, 6
  CHECK(s.shape() == Shape{3, 3});
  CHECK_FALSE(s.is_contiguous());
  check_values(s.contiguous(), {9, 12, 15, 25, 28, 31, 41, 44, 47});
  check_values(s.clone(), {9, 12, 15, 25, 28, 31, 41, 44, 47});
}

TEST_CASE("view reinterprets a contiguous tensor and infers one -1 dimension") {
  const Tensor t = int64_range({2, 6});
  const Tensor v = t.view({3, -1});
  CHECK(v.shape() == Shape{3, 4});
  CHECK(v.strides() == Strides{4, 1});
  CHECK(v.storage() == t.storage());
  check_values(v, counting(1, 12));
  CHECK(t.view({-1}).shape() == Shape{12});
  CHECK(t.view({2, 1, 3, 2}).shape() == Shape{2, 1, 3, 2});
  CHECK(t.select(0, 1).view({3, 2}).at<std::int64_t>({0, 0}) == 7);
  CHECK(Tensor::full({}, 4, {DType::Int64}).view({1, -1}).shape() == Shape{1, 1});
}

TEST_CASE("view rejects mismatched sizes, two -1 entries, negatives and non-contiguous tensors") {
  const Tensor t = int64_range({2, 6});
  REQUIRE_THROWS_WITH(t.view({5, 2}), Catch::Contains("[2, 6]") && Catch::Contains("[5, 2]"));
  REQUIRE_THROWS_AS(t.view({5, -1}), InvalidArgument);
  REQUIRE_THROWS_WITH(t.view({-1, -1}), Catch::Contains("-1"));
  REQUIRE_THROWS_AS(t.view({-2, -6}), InvalidArgument);
  REQUIRE_THROWS_AS(t.view({std::int64_t{1} << 40, std::int64_t{1} << 40, 0}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::empty({0, 3}).view({-1, 0}), InvalidArgument);
  REQUIRE_THROWS_WITH(t.transpose(0, 1).view({12}), Catch::Contains("reshape"));
}

TEST_CASE("reshape copies a non-contiguous tensor and views a contiguous one") {
  const Tensor t = int64_range({2, 3});
  const Tensor r = t.transpose(0, 1).reshape({-1});
  check_values(r, {1, 4, 2, 5, 3, 6});
  CHECK(r.storage() != t.storage());
  CHECK(t.reshape({3, 2}).storage() == t.storage());
}

TEST_CASE("unsqueeze inserts a size-1 dimension at any position, negative counting from the end") {
  const Tensor t = int64_range({2, 3});
  CHECK(t.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(t.unsqueeze(0).strides() == Strides{6, 3, 1});
  CHECK(t.unsqueeze(1).shape() == Shape{2, 1, 3});
  CHECK(t.unsqueeze(1).strides() == Strides{3, 3, 1});
  CHECK(t.unsqueeze(2).shape() == Shape{2, 3, 1});
  CHECK(t.unsqueeze(2).strides() == Strides{3, 1, 1});
  CHECK(t.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(t.unsqueeze(-3).shape() == Shape{1, 2, 3});
  CHECK(t.unsqueeze(1).is_contiguous());
  CHECK(t.unsqueeze(1).storage() == t.storage());
  check_values(t.unsqueeze(1), counting(1, 6));
  check_values(t.transpose(0, 1).unsqueeze(1).contiguous(), {1, 4, 2, 5, 3, 6});
  CHECK(Tensor::full({}, 2, {DType::Int64}).unsqueeze(0).shape() == Shape{1});
  REQUIRE_THROWS_WITH(t.unsqueeze(3), Catch::Contains("dimension 3") && Catch::Contains("-3 to 2"));
  REQUIRE_THROWS_AS(t.unsqueeze(-4), InvalidArgument);
}

// ---- copies -----------------------------------------------------------------------------------

TEST_CASE("clone owns a fresh buffer: writing to it leaves the original unchanged") {
  const Tensor t = int64_range({2, 3});
  const Tensor c = t.clone();
  CHECK(c.storage() != t.storage());
  c.at<std::int64_t>({1, 2}) = -40;
  c.fill_(9);
  check_values(t, counting(1, 6));
  check_values(c, std::vector<double>(6, 9));
}

TEST_CASE("contiguous returns the same view when already contiguous") {
  const Tensor t = int64_range({2, 3});
  CHECK(t.contiguous().data_ptr() == t.data_ptr());
  CHECK(t.contiguous().storage() == t.storage());
}

TEST_CASE("copy_ writes into a strided destination and leaves the gaps untouched") {
  const Tensor dst = Tensor::full({4, 6}, -1, {DType::Int64});
  dst.slice(1, {0, 6, 2}).copy_(int64_range({4, 3}));
  std::vector<double> expected;
  for (int row = 0; row < 4; ++row) {
    for (int col = 0; col < 6; ++col) expected.push_back(col % 2 == 0 ? row * 3 + col / 2 + 1 : -1);
  }
  check_values(dst, expected);
}

TEST_CASE("copy_ into a transposed destination stores the transpose") {
  const Tensor dst = Tensor::zeros({3, 2}, {DType::Float32});
  dst.transpose(0, 1).copy_(Tensor::arange({2, 3}, 1, 1, {DType::Float32}));
  check_values(dst, {1, 4, 2, 5, 3, 6});
}

TEST_CASE("copy_ from a tensor into itself keeps its values") {
  const Tensor t = int64_range({4, 4});
  t.copy_(t);
  t.slice(0, {0, 4, 2}).copy_(t.slice(0, {0, 4, 2}));
  check_values(t, counting(1, 16));
}

TEST_CASE("copy_ rejects another shape or dtype, naming both") {
  const Tensor dst = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(dst.copy_(Tensor::zeros({3, 2})),
                      Catch::Contains("[3, 2]") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(dst.copy_(Tensor::zeros({2, 3}, {DType::Int32})),
                      Catch::Contains("int32") && Catch::Contains("float32"));
  REQUIRE_THROWS_AS(dst.copy_(Tensor()), InvalidArgument);
}

TEST_CASE("fill_ on a column view changes that column only") {
  const Tensor t = int64_range({3, 3});
  t.select(1, 1).fill_(-7);
  check_values(t, {1, -7, 3, 4, -7, 6, 7, -7, 9});
  t.fill_(2);
  check_values(t, std::vector<double>(9, 2));
}

TEST_CASE("to(cpu) of a CPU tensor returns the same view") {
  const Tensor t = int64_range({2});
  CHECK(t.to(Device::cpu()).storage() == t.storage());
  CHECK(t.to(Device(DeviceType::CPU, 0)).storage() == t.storage());
}

TEST_CASE("CUDA tensors are refused with NotSupported when no CUDA device can be used") {
  if (cuda_device_count() > 0) return;  // tests/gpu covers the device path
  const Tensor t = int64_range({2, 3});
  REQUIRE_THROWS_AS(t.to(Device::cuda()), NotSupported);
  REQUIRE_THROWS_AS(t.to(Device::cuda(0)), NotSupported);
  REQUIRE_THROWS_AS(Tensor::empty({2}, {DType::Float32, Device::cuda(0)}), NotSupported);
  REQUIRE_THROWS_AS(Tensor::arange({2}, 1, 1, {DType::Float32, Device::cuda()}), NotSupported);
  REQUIRE_THROWS_AS(Tensor::empty({2}, {DType::Float32, Device::cpu(), true}), NotSupported);
  REQUIRE_THROWS_WITH(t.to(Device::cuda()),
                      Catch::Contains(TT_HAVE_CUDA ? "no CUDA device" : "built without CUDA"));
}

TEST_CASE("pinned memory cannot be asked for on a CUDA device") {
  REQUIRE_THROWS_AS(Tensor::empty({2}, {DType::Float32, Device::cuda(0), true}), InvalidArgument);
}

// ---- comparison -------------------------------------------------------------------------------

TEST_CASE("equal compares shape, dtype and every value; NaN never equals, -0 equals 0") {
  const Tensor a = Tensor::arange({2, 3}, 1, 1, {DType::Float32});
  CHECK(a.equal(a.clone()));
  CHECK(a.transpose(0, 1).equal(a.transpose(0, 1).contiguous()));
  CHECK_FALSE(a.equal(a.view({3, 2})));
  CHECK_FALSE(a.equal(Tensor::arange({2, 3}, 1, 1, {DType::Float64})));
  const Tensor b = a.clone();
  b.at<float>({1, 2}) = 6.5f;
  CHECK_FALSE(a.equal(b));

  const Tensor nan = Tensor::full({2}, NAN, {DType::Float32});
  CHECK_FALSE(nan.equal(nan));
  CHECK_FALSE(Tensor::full({1}, NAN, {DType::Float16}).equal(Tensor::full({1}, NAN, {DType::Float16})));
  CHECK(Tensor::full({2}, -0.0, {DType::Float64}).equal(Tensor::zeros({2}, {DType::Float64})));
  CHECK(Tensor::full({2}, -0.0, {DType::BFloat16}).equal(Tensor::zeros({2}, {DType::BFloat16})));
}

TEST_CASE("equal tells 64-bit integers apart that a double cannot") {
  const Tensor a = Tensor::full({1}, 0, {DType::Int64});
  const Tensor b = Tensor::full({1}, 0, {DType::Int64});
  a.at<std::int64_t>({0}) = (std::int64_t{1} << 53) + 1;
  b.at<std::int64_t>({0}) = std::int64_t{1} << 53;
  CHECK_FALSE(a.equal(b));
  b.at<std::int64_t>({0}) += 1;
  CHECK(a.equal(b));
  const Tensor u = Tensor::zeros({1}, {DType::UInt64});
  const Tensor v = Tensor::zeros({1}, {DType::UInt64});
  u.at<std::uint64_t>({0}) = std::numeric_limits<std::uint64_t>::max();
  v.at<std::uint64_t>({0}) = std::numeric_limits<std::uint64_t>::max() - 1;
  CHECK_FALSE(u.equal(v));
}

TEST_CASE("equal compares complex values in both parts") {
  const Tensor a = Tensor::arange({2}, 1, 1, {DType::Complex64});
  const Tensor b = a.clone();
  CHECK(a.equal(b));
  b.at<std::complex<float>>({1}) = {2.0f, 0.5f};
  CHECK_FALSE(a.equal(b));
}

// ---- ownership --------------------------------------------------------------------------------

TEST_CASE("from_blob calls its deleter exactly once, after the last view is gone") {
  std::vector<float> buffer = {1, 2, 3, 4, 5, 6};
  int calls = 0;
  void* released = nullptr;
  Tensor column;
  {
    const Tensor t = Tensor::from_blob(buffer.data(), {2, 3}, DType::Float32, Device::cpu(),
                                       [&](void* p) {
                                         ++calls;
                                         released = p;
                                       });
    CHECK(t.storage()->kind() == MemoryKind::Foreign);
    check_values(t, counting(1, 6));
    column = t.select(1, 2);
  }
  CHECK(calls == 0);
  check_values(column, {3, 6});
  Tensor copy = column;
  column = Tensor();
  CHECK(calls == 0);
  copy = Tensor();
  CHECK(calls == 1);
  CHECK(released == buffer.data());
}

TEST_CASE("from_blob views foreign memory through explicit strides") {
  std::vector<std::int32_t> buffer = {1, 2, 3, 4, 5, 6, 7, 8};
  const Tensor t = Tensor::from_blob(buffer.data(), {4}, DType::Int32, Device::cpu(), nullptr, {2});
  check_values(t, {1, 3, 5, 7});
  CHECK(t.storage()->nbytes() == 7 * sizeof(std::int32_t));
  t.at<std::int32_t>({1}) = -3;
  CHECK(buffer[2] == -3);
}

TEST_CASE("from_blob that throws leaves the memory with the caller: the deleter never runs") {
  float cell = 1;
  int calls = 0;
  const auto count = [&](void*) { ++calls; };
  REQUIRE_THROWS_AS(Tensor::from_blob(&cell, {2, 3}, DType::Float32, Device::cpu(), count, {1}),
                    InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::from_blob(&cell, {2}, DType::Float32, Device::cpu(), count, {-1}),
                    InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::from_blob(&cell, {-2}, DType::Float32, Device::cpu(), count), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::from_blob(&cell, {2, 2}, DType::Float32, Device::cpu(), count,
                                      {kInt64Max, 1}),
                    InvalidArgument);
  REQUIRE_THROWS_WITH(Tensor::from_blob(nullptr, {2}, DType::Float32, Device::cpu(), count),
                      Catch::Contains("null"));
  if (cuda_device_count() == 0) {
    REQUIRE_THROWS_AS(Tensor::from_blob(&cell, {1}, DType::Float32, Device::cuda(), count), NotSupported);
  }
  CHECK(calls == 0);
}

TEST_CASE("a view keeps its storage alive after the tensor it came from is gone") {
  Tensor row;
  std::weak_ptr<Storage> storage;
  {
    const Tensor t = int64_range({3, 4});
    storage = t.storage();
    row = t.select(0, 2);
  }
  CHECK_FALSE(storage.expired());
  check_values(row, {9, 10, 11, 12});
  row = Tensor();
  CHECK(storage.expired());
}

TEST_CASE("writes through a view are seen by every other view of the storage") {
  const Tensor t = int64_range({2, 3});
  t.transpose(0, 1).at<std::int64_t>({2, 1}) = 60;
  CHECK(t.at<std::int64_t>({1, 2}) == 60);
  t.view({6}).at<std::int64_t>({0}) = 10;
  check_values(t, {10, 2, 3, 4, 5, 60});
}

// ---- element access and validation -------------------------------------------------------------

TEST_CASE("typed access refuses another element type, a wrong index count and out-of-range indices") {
  const Tensor t = Tensor::arange({2, 3}, 1, 1, {DType::Float32});
  CHECK(t.at<float>({1, 2}) == 6.0f);
  CHECK(t.data<float>()[4] == 5.0f);
  REQUIRE_THROWS_WITH(t.at<double>({0, 0}), Catch::Contains("float64") && Catch::Contains("float32"));
  REQUIRE_THROWS_AS(t.at<std::int32_t>({0, 0}), InvalidArgument);
  REQUIRE_THROWS_AS(t.data<std::uint8_t>(), InvalidArgument);
  REQUIRE_THROWS_WITH(t.at<float>({1}), Catch::Contains("1 coordinates"));
  REQUIRE_THROWS_WITH(t.at<float>({0, 3}), Catch::Contains("index 3") && Catch::Contains("size 3"));
  REQUIRE_THROWS_AS(t.at<float>({-1, 0}), InvalidArgument);
  REQUIRE_THROWS_AS(t.value_at_linear(6), InvalidArgument);
}

TEST_CASE("value_at_linear walks a non-contiguous view in C order") {
  const Tensor t = int64_range({3, 4}).permute({1, 0});
  check_values(t, {1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12});
}

TEST_CASE("a view that reaches beyond its storage is rejected") {
  const StoragePtr storage = Storage::allocate(16, Device::cpu());
  CHECK(Tensor(storage, 4, DType::Float32, {3}, {}).numel() == 3);  // bytes 4..15
  CHECK(Tensor(storage, 0, DType::Float32, {2}, {3}).numel() == 2);  // bytes 0..3 and 12..15
  REQUIRE_THROWS_WITH(Tensor(storage, 8, DType::Float32, {3}, {}),
                      Catch::Contains("byte offset 8") && Catch::Contains("16"));
  REQUIRE_THROWS_AS(Tensor(storage, 4, DType::Float32, {2}, {3}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor(storage, 0, DType::Float64, {3}, {}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor(storage, std::numeric_limits<std::size_t>::max() - 2, DType::UInt8, {4}, {}),
                    InvalidArgument);
  REQUIRE_THROWS_AS(Tensor(storage, 0, DType::UInt8, {2, 2}, {kInt64Max / 2, 1}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor(storage, 0, DType::UInt8, {2}, {-1}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor(storage, 0, DType::UInt8, {2}, {1, 1}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor(nullptr, 0, DType::UInt8, {2}, {}), InvalidArgument);
  CHECK(Tensor(storage, 1000, DType::UInt8, {0}, {}).numel() == 0);  // an empty view touches nothing
}

TEST_CASE("an undefined tensor has no elements and refuses operations") {
  const Tensor t;
  CHECK_FALSE(t.defined());
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.data_ptr() == nullptr);
  REQUIRE_THROWS_WITH(t.clone(), Catch::Contains("undefined"));
  REQUIRE_THROWS_AS(t.slice(0, {0, 1}), InvalidArgument);
  REQUIRE_THROWS_AS(t.unsqueeze(0), InvalidArgument);
  REQUIRE_THROWS_AS(t.fill_(1), InvalidArgument);
  REQUIRE_THROWS_AS(t.equal(t), InvalidArgument);
}

// ---- gather and join --------------------------------------------------------------------------

TEST_CASE("index_select gathers rows in index order, repeats allowed, negatives from the end") {
  const Tensor t = int64_range({4, 3});
  const Tensor rows = Tensor::from_blob(new std::int64_t[4]{2, 0, -1, 2}, {4}, DType::Int64, Device::cpu(),
                                        [](void* p) { delete[] static_cast<std::int64_t*>(p); });
  const Tensor s = t.index_select(0, rows);
  CHECK(s.shape() == Shape{4, 3});
  CHECK(s.is_contiguous());
  CHECK(s.storage() != t.storage());
  check_values(s, {7, 8, 9, 1, 2, 3, 10, 11, 12, 7, 8, 9});
}

TEST_CASE("index_select along an inner dimension, with an int32 index") {
  const Tensor t = int64_range({2, 4, 2});
  Tensor index = Tensor::zeros({2}, {DType::Int32});
  index.at<std::int32_t>({0}) = 3;
  index.at<std::int32_t>({1}) = -4;
  const Tensor s = t.index_select(1, index);
  CHECK(s.shape() == Shape{2, 2, 2});
  check_values(s, {7, 8, 1, 2, 15, 16, 9, 10});
  const Tensor first_columns = t.index_select(-1, Tensor::zeros({3}, {DType::Int64}));
  CHECK(first_columns.shape() == Shape{2, 4, 3});
  check_values(first_columns, {1, 1, 1, 3, 3, 3, 5, 5, 5, 7, 7, 7, 9, 9, 9, 11, 11, 11, 13, 13, 13, 15, 15, 15});
}

TEST_CASE("index_select of a non-contiguous tensor and with a strided index") {
  const Tensor t = int64_range({3, 4}).transpose(0, 1);  // t[i][j] = 1 + j * 4 + i
  const Tensor index = Tensor::arange({6}, 3, -1, {DType::Int64}).slice(0, {0, 6, 2});  // 3, 1, -1
  check_values(t.index_select(0, index), {4, 8, 12, 2, 6, 10, 4, 8, 12});
  check_values(t.index_select(1, index.slice(0, {1, 3})), {5, 9, 6, 10, 7, 11, 8, 12});
}

TEST_CASE("index_select with an empty index gives an empty dimension") {
  const Tensor s = int64_range({3, 2}).index_select(0, Tensor::empty({0}, {DType::Int64}));
  CHECK(s.shape() == Shape{0, 2});
}

TEST_CASE("index_select rejects out-of-range entries and index tensors of the wrong kind") {
  const Tensor t = int64_range({3, 2});
  const Tensor bad = Tensor::arange({3}, 1, 1, {DType::Int64});  // 1, 2, 3
  REQUIRE_THROWS_WITH(t.index_select(0, bad),
                      Catch::Contains("index[2] = 3") && Catch::Contains("dimension 0 of size 3"));
  REQUIRE_THROWS_AS(t.index_select(0, Tensor::full({1}, -4, {DType::Int64})), InvalidArgument);
  REQUIRE_THROWS_WITH(t.index_select(0, Tensor::zeros({2}, {DType::Float32})), Catch::Contains("float32"));
  REQUIRE_THROWS_WITH(t.index_select(0, Tensor::zeros({1, 2}, {DType::Int64})), Catch::Contains("[1, 2]"));
  REQUIRE_THROWS_AS(t.index_select(0, Tensor()), InvalidArgument);
  REQUIRE_THROWS_AS(t.index_select(2, Tensor::zeros({1}, {DType::Int64})), InvalidArgument);
}

TEST_CASE("stack joins same-shaped tensors along a new dimension at any position") {
  const std::vector<Tensor> parts = {int64_range({2, 3}), Tensor::arange({2, 3}, 11, 1, {DType::Int64}),
                                     Tensor::arange({2, 3}, 21, 1, {DType::Int64})};
  const Tensor s0 = Tensor::stack(parts, 0);
  CHECK(s0.shape() == Shape{3, 2, 3});
  check_values(s0, {1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16, 21, 22, 23, 24, 25, 26});
  const Tensor s1 = Tensor::stack(parts, 1);
  CHECK(s1.shape() == Shape{2, 3, 3});
  check_values(s1, {1, 2, 3, 11, 12, 13, 21, 22, 23, 4, 5, 6, 14, 15, 16, 24, 25, 26});
  const Tensor s2 = Tensor::stack(parts, -1);
  CHECK(s2.shape() == Shape{2, 3, 3});
  check_values(s2, {1, 11, 21, 2, 12, 22, 3, 13, 23, 4, 14, 24, 5, 15, 25, 6, 16, 26});
  CHECK(Tensor::stack(parts, 2).equal(s2));
  check_values(Tensor::stack({parts[0].transpose(0, 1), parts[1].transpose(0, 1)}),
               {1, 4, 2, 5, 3, 6, 11, 14, 12, 15, 13, 16});
}

TEST_CASE("stack rejects different shapes, dtypes and empty lists, naming the offending tensor") {
  const Tensor a = int64_range({2, 3});
  REQUIRE_THROWS_WITH(Tensor::stack({a, a, int64_range({3, 2})}),
                      Catch::Contains("tensor 2") && Catch::Contains("[3, 2]") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(Tensor::stack({a, Tensor::zeros({2, 3}, {DType::Int32})}),
                      Catch::Contains("tensor 1") && Catch::Contains("int32") && Catch::Contains("int64"));
  REQUIRE_THROWS_AS(Tensor::stack(std::vector<Tensor>{}), InvalidArgument);
  REQUIRE_THROWS_WITH(Tensor::stack({a, Tensor()}), Catch::Contains("tensor 1 is undefined"));
  REQUIRE_THROWS_AS(Tensor::stack({a, a}, 3), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::stack({a, a}, -4), InvalidArgument);
}

TEST_CASE("cat joins tensors that differ only in the joined dimension") {
  const Tensor a = int64_range({2, 2});
  const Tensor b = Tensor::arange({2, 3}, 11, 1, {DType::Int64});
  const Tensor c1 = Tensor::cat({a, b}, 1);
  CHECK(c1.shape() == Shape{2, 5});
  check_values(c1, {1, 2, 11, 12, 13, 3, 4, 14, 15, 16});
  const Tensor c0 = Tensor::cat({a, b.slice(1, {0, 2}), Tensor::empty({0, 2}, {DType::Int64})}, -2);
  CHECK(c0.shape() == Shape{4, 2});
  check_values(c0, {1, 2, 3, 4, 11, 12, 14, 15});
  check_values(Tensor::cat({a.transpose(0, 1)}), {1, 3, 2, 4});
  CHECK(Tensor::cat({a}).storage() != a.storage());
}

TEST_CASE("cat rejects shape, rank, dtype mismatches naming the first offending tensor and both shapes") {
  const Tensor a = int64_range({2, 3});
  REQUIRE_THROWS_WITH(Tensor::cat({a, a, int64_range({2, 4})}, 0),
                      Catch::Contains("tensor 2") && Catch::Contains("[2, 4]") && Catch::Contains("[2, 3]") &&
                          Catch::Contains("dimension 0"));
  REQUIRE_THROWS_WITH(Tensor::cat({a, int64_range({2, 3, 1})}, 1),
                      Catch::Contains("tensor 1") && Catch::Contains("[2, 3, 1]"));
  REQUIRE_THROWS_WITH(Tensor::cat({a, Tensor::zeros({2, 3})}, 1),
                      Catch::Contains("tensor 1") && Catch::Contains("float32") && Catch::Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(Tensor::cat({Tensor::full({}, 1), Tensor::full({}, 2)}),
                      Catch::Contains("zero-dimensional"));
  REQUIRE_THROWS_AS(Tensor::cat(std::vector<Tensor>{}), InvalidArgument);
  REQUIRE_THROWS_AS(Tensor::cat({a, a}, 2), InvalidArgument);
}

// ---- shapes and devices -----------------------------------------------------------------------

TEST_CASE("shape helpers: numel, C-order strides, printing, prefixes, overflow") {
  CHECK(numel_of(Shape{2, 3, 4}) == 24);
  CHECK(numel_of(Shape{}) == 1);
  CHECK(numel_of(Shape{5, 0}) == 0);
  CHECK(contiguous_strides(Shape{2, 3, 4}) == Strides{12, 4, 1});
  CHECK(contiguous_strides(Shape{2, 0, 4}) == Strides{4, 4, 1});
  CHECK(shape_str(Shape{2, 3}) == "[2, 3]");
  CHECK(shape_str(Shape{}) == "[]");
  CHECK(starts_with(Shape{2, 3, 4}, Shape{2, 3}));
  CHECK_FALSE(starts_with(Shape{2, 3}, Shape{2, 3, 4}));
  CHECK_FALSE(starts_with(Shape{2, 3}, Shape{3}));
  REQUIRE_THROWS_WITH(numel_of(Shape{2, -3}), Catch::Contains("[2, -3]"));
  REQUIRE_THROWS_AS(numel_of(Shape{std::int64_t{1} << 32, std::int64_t{1} << 32}), InvalidArgument);
  REQUIRE_THROWS_AS(contiguous_strides(Shape{0, std::int64_t{1} << 40, std::int64_t{1} << 40}),
                    InvalidArgument);
}

TEST_CASE("devices parse and print as PyTorch writes them") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda());
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::cuda(3).str() == "cuda:3");
  CHECK(Device::cuda().str() == "cuda");
  CHECK(Device::cpu().str() == "cpu");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", ""}) {
    INFO(bad);
    REQUIRE_THROWS_AS(Device::parse(bad), InvalidArgument);
  }
  REQUIRE_THROWS_WITH(Device::parse("cuda:x"), Catch::Contains("cuda:x"));
}

TEST_CASE("resolve_device maps every CPU device to cpu() and checks CUDA devices exist") {
  CHECK(resolve_device(Device(DeviceType::CPU, 2)) == Device::cpu());
  const int count = cuda_device_count();
  if (count == 0) {
    REQUIRE_THROWS_AS(resolve_device(Device::cuda()), NotSupported);
    REQUIRE_THROWS_AS(resolve_device(Device::cuda(0)), NotSupported);
  } else {
    CHECK(resolve_device(Device::cuda()).index() >= 0);
    REQUIRE_THROWS_AS(resolve_device(Device::cuda(count)), InvalidArgument);
  }
  CHECK(build_features().find(TT_HAVE_CUDA ? "cuda=yes" : "cuda=no") != std::string::npos);
}

TEST_CASE("byte_view is a contiguous tensor's bytes over the same storage, and refuses strided tensors") {
  const Tensor values = Tensor::arange({2, 3}, 1, 1, {DType::Int32}).narrow(0, 1, 1);  // the second row: 4, 5, 6
  const Tensor bytes = values.byte_view();
  CHECK(bytes.dtype() == DType::UInt8);
  CHECK(bytes.shape() == Shape{12});
  CHECK(bytes.storage() == values.storage());
  CHECK(bytes.byte_offset() == values.byte_offset());
  for (std::int64_t i = 0; i < 3; ++i) {
    std::int32_t value = 0;
    std::memcpy(&value, bytes.data<std::uint8_t>() + 4 * i, sizeof value);
    CHECK(value == 4 + i);
  }
  bytes.data<std::uint8_t>()[0] = 0;  // writes through to the tensor
  CHECK(values.value_at_linear(0) == std::complex<double>(0.0, 0.0));
  CHECK_THROWS_AS(Tensor::arange({2, 3}, 1).transpose(0, 1).byte_view(), InvalidArgument);
}

TEST_CASE("full and fill_ refuse a value their dtype cannot hold, naming it, as PyTorch does") {
  CHECK_THROWS_WITH(Tensor::full({2}, 300, {DType::UInt8}),
                    Catch::Contains("fill_: value 300 cannot be converted to uint8 without overflow"));
  CHECK_THROWS_AS(Tensor::full({2}, -129, {DType::Int8}), InvalidArgument);
  CHECK_THROWS_AS(Tensor::full({2}, 70000, {DType::Float16}), InvalidArgument);
  CHECK_THROWS_AS(Tensor::full({2}, 500, {DType::Float8_e4m3fn}), InvalidArgument);
  CHECK_THROWS_AS(Tensor::full({2}, 1e39, {DType::Float32}), InvalidArgument);
  const Tensor bytes = Tensor::zeros({3}, {DType::UInt8});
  CHECK_THROWS_AS(bytes.fill_(256), InvalidArgument);
  CHECK_THROWS_AS(bytes.masked_fill_(Tensor::full({3}, 1, {DType::Bool}), 256), InvalidArgument);
  CHECK(bytes.data<std::uint8_t>()[0] == 0);  // refused before anything was written

  // What fits is stored: the range's ends, a negative wrapping into an unsigned type as -1 fills
  // a uint8 with 255 in PyTorch, infinities and NaN in floating types.
  CHECK(Tensor::full({1}, 255, {DType::UInt8}).data<std::uint8_t>()[0] == 255);
  CHECK(Tensor::full({1}, -1, {DType::UInt8}).data<std::uint8_t>()[0] == 255);
  CHECK(Tensor::full({1}, -128, {DType::Int8}).data<std::int8_t>()[0] == -128);
  CHECK(static_cast<float>(Tensor::full({1}, 65504, {DType::Float16}).data<Half>()[0]) == 65504.0f);
  CHECK(std::isinf(Tensor::full({1}, INFINITY, {DType::Float16}).value_at_linear(0).real()));
  CHECK(Tensor::full({1}, 1e300, {DType::Float64}).data<double>()[0] == 1e300);
  CHECK(Tensor::full({1}, 7, {DType::Bool}).data<bool>()[0]);
}
