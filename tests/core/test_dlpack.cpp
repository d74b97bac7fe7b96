#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensortree/dlpack.hpp"

using namespace tensortree;

namespace {

// ---- helpers -----------------------------------------------------------------------------------

// Every element of `actual` (any strides) equals `expected`'s at the same C-order index.
void check_values(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.dtype() == expected.dtype());
  REQUIRE(actual.shape() == expected.shape());
  for (std::int64_t i = 0; i < expected.numel(); ++i) {
    INFO("element " << i << " of a " << dtype_name(expected.dtype()) << " tensor");
    CHECK(actual.value_at_linear(i) == expected.value_at_linear(i));
  }
}

std::vector<std::int64_t> dl_shape(const DLTensor& dl) { return {dl.shape, dl.shape + dl.ndim}; }
std::vector<std::int64_t> dl_strides(const DLTensor& dl) {
  return {dl.strides, dl.strides + dl.ndim};
}

DLDataType dl_type(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes = 1) {
  DLDataType type{};
  type.code = code;
  type.bits = bits;
  type.lanes = lanes;
  return type;
}

DLDevice dl_device(DLDeviceType type, std::int32_t id = 0) {
  DLDevice device{};
  device.device_type = type;
  device.device_id = id;
  return device;
}

// A managed tensor as a foreign producer would build it, with a deleter that counts its calls.
struct ForeignSpec {
  void* data = nullptr;
  DLDataType dtype = dl_type(kDLFloat, 32);
  DLDevice device = dl_device(kDLCPU);
  std::vector<std::int64_t> shape = {};
  std::optional<std::vector<std::int64_t>> strides = std::nullopt;  // nullopt: NULL strides
  std::uint64_t byte_offset = 0;
};

template <class Managed>
struct ForeignTensor {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  int* deletions = nullptr;
  Managed managed{};
};

template <class Managed>
void count_deletion(Managed* self) {
  auto* owner = static_cast<ForeignTensor<Managed>*>(self->manager_ctx);
  ++*owner->deletions;
  delete owner;
}

template <class Managed>
Managed* make_foreign(const ForeignSpec& spec, int* deletions) {
  auto* owner = new ForeignTensor<Managed>{
      spec.shape, spec.strides.value_or(std::vector<std::int64_t>{}), deletions, {}};
  DLTensor& dl = owner->managed.dl_tensor;
  dl.data = spec.data;
  dl.device = spec.device;
  dl.ndim = static_cast<std::int32_t>(owner->shape.size());
  dl.dtype = spec.dtype;
  dl.shape = owner->shape.data();
  dl.strides = spec.strides ? owner->strides.data() : nullptr;
  dl.byte_offset = spec.byte_offset;
  owner->managed.manager_ctx = owner;
  owner->managed.deleter = &count_deletion<Managed>;
  return &owner->managed;
}

DLManagedTensorVersioned* make_foreign_versioned(const ForeignSpec& spec, int* deletions,
                                                 std::uint32_t major = 1, std::uint32_t minor = 1) {
  auto* managed = make_foreign<DLManagedTensorVersioned>(spec, deletions);
  managed->version.major = major;
  managed->version.minor = minor;
  return managed;
}

// Runs `action`, which must throw `Expected` with a message that mentions `what`.
template <class Expected, class Action>
void check_throws_mentioning(Action&& action, const std::string& what) {
  try {
    action();
    FAIL("no exception was thrown; expected one mentioning '" << what << "'");
  } catch (const Expected& error) {
    CHECK_THAT(std::string(error.what()), Catch::Matchers::Contains(what));
  }
}

// Checks that importing `spec` throws `Expected` mentioning `what`, and that the managed tensor
// stays with the caller: not deleted by the failed import, still deletable exactly once afterwards.
template <class Expected>
void check_rejected_and_not_consumed(const ForeignSpec& spec, const std::string& what) {
  int deletions = 0;
  DLManagedTensor* legacy = make_foreign<DLManagedTensor>(spec, &deletions);
  check_throws_mentioning<Expected>([&] { from_dlpack(legacy); }, what);
  CHECK(deletions == 0);
  legacy->deleter(legacy);
  CHECK(deletions == 1);

  deletions = 0;
  DLManagedTensorVersioned* versioned = make_foreign_versioned(spec, &deletions);
  check_throws_mentioning<Expected>([&] { from_dlpack(versioned); }, what);
  CHECK(deletions == 0);
  versioned->deleter(versioned);
  CHECK(deletions == 1);
}

struct ExpectedDLType {
  DType dtype;
  std::uint8_t code;
  std::uint8_t bits;
};

// The type codes and widths of dlpack.h 1.1, written out to check the header's values too.
const std::vector<ExpectedDLType> kDLTypeTable = {
    {DType::Bool, 6, 8},           {DType::UInt8, 1, 8},        {DType::UInt16, 1, 16},
    {DType::UInt32, 1, 32},        {DType::UInt64, 1, 64},      {DType::Int8, 0, 8},
    {DType::Int16, 0, 16},         {DType::Int32, 0, 32},       {DType::Int64, 0, 64},
    {DType::Float16, 2, 16},       {DType::BFloat16, 4, 16},    {DType::Float32, 2, 32},
    {DType::Float64, 2, 64},       {DType::Complex64, 5, 64},   {DType::Complex128, 5, 128},
    {DType::Float8_e4m3fn, 10, 8}, {DType::Float8_e5m2, 12, 8},
};

// Non-zero test data: bool alternates false/true so that a misplaced element shows; the other
// dtypes count up from 0.5 in steps of 0.5.
Tensor sample(const Shape& shape, DType dtype) {
  if (dtype != DType::Bool) return Tensor::arange(shape, 0.5, 0.5, {dtype});
  Tensor flags = Tensor::empty(shape, {DType::Bool});
  for (std::int64_t i = 0; i < flags.numel(); ++i) flags.data<bool>()[i] = i % 2 == 1;
  return flags;
}

}  // namespace

// ---- ABI ---------------------------------------------------------------------------------------

TEST_CASE("the DLPack 1.1 definitions have the values and layout of dlpack.h 1.1", "[dlpack]") {
  CHECK(kDLBool == 6);
  CHECK(kDLFloat8_e3m4 == 7);
  CHECK(kDLFloat8_e4m3fn == 10);
  CHECK(kDLFloat8_e5m2 == 12);
  CHECK(kDLFloat4_e2m1fn == 17);
  CHECK(DLPACK_FLAG_BITMASK_READ_ONLY == 1);
  CHECK(DLPACK_FLAG_BITMASK_IS_COPIED == 2);
  CHECK(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == 4);
  CHECK(offsetof(DLManagedTensorVersioned, version) == 0);
  CHECK(offsetof(DLManagedTensorVersioned, flags) == 24);
  CHECK(offsetof(DLManagedTensorVersioned, dl_tensor) == 32);
}

// ---- export then import ------------------------------------------------------------------------

TEST_CASE("to_dlpack writes the DLPack type code and bits of every dtype", "[dlpack]") {
  for (const ExpectedDLType& expected : kDLTypeTable) {
    INFO(dtype_name(expected.dtype));
    DLManagedTensor* managed = to_dlpack(sample({2, 3}, expected.dtype));
    CHECK(managed->dl_tensor.dtype.code == expected.code);
    CHECK(managed->dl_tensor.dtype.bits == expected.bits);
    CHECK(managed->dl_tensor.dtype.lanes == 1);
    managed->deleter(managed);
  }
  CHECK(kDLTypeTable.size() == kAllDTypes.size());
}

TEST_CASE("to_dlpack then from_dlpack keeps the data pointer and every value of every dtype",
          "[dlpack]") {
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    const Tensor original = sample({3, 4}, dtype);
    {
      const Tensor imported = from_dlpack(to_dlpack(original));
      CHECK(imported.data_ptr() == original.data_ptr());
      CHECK(imported.strides() == original.strides());
      CHECK(imported.device() == Device::cpu());
      check_values(imported, sample({3, 4}, dtype));
      CHECK(original.storage().use_count() == 2);  // the export context holds the other reference
    }
    CHECK(original.storage().use_count() == 1);  // the import called the export's deleter
  }
}

TEST_CASE("to_dlpack_versioned then from_dlpack keeps data pointer and values of every dtype",
          "[dlpack]") {
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    const Tensor original = sample({2, 5}, dtype);
    {
      const Tensor imported = from_dlpack(to_dlpack_versioned(original));
      CHECK(imported.data_ptr() == original.data_ptr());
      check_values(imported, sample({2, 5}, dtype));
      CHECK(original.storage().use_count() == 2);
    }
    CHECK(original.storage().use_count() == 1);
  }
}

TEST_CASE("to_dlpack fills device, shape, strides and a zero byte_offset", "[dlpack]") {
  const Tensor tensor = Tensor::arange({2, 3, 4}, 1.0, 1.0, {DType::Int32});
  DLManagedTensor* managed = to_dlpack(tensor);
  const DLTensor& dl = managed->dl_tensor;
  CHECK(dl.data == tensor.data_ptr());
  CHECK(dl.device.device_type == kDLCPU);
  CHECK(dl.device.device_id == 0);
  CHECK(dl.ndim == 3);
  CHECK(dl_shape(dl) == std::vector<std::int64_t>{2, 3, 4});
  CHECK(dl_strides(dl) == std::vector<std::int64_t>{12, 4, 1});
  CHECK(dl.byte_offset == 0);
  CHECK(managed->manager_ctx != nullptr);
  CHECK(tensor.storage().use_count() == 2);
  managed->deleter(managed);
  CHECK(tensor.storage().use_count() == 1);
}

TEST_CASE("exporting a transposed tensor keeps its strides and its values", "[dlpack]") {
  const Tensor base = Tensor::arange({3, 4}, 1.0, 1.0, {DType::Float32});
  const Tensor transposed = base.transpose(0, 1);  // shape [4, 3], strides [1, 4]
  DLManagedTensor* managed = to_dlpack(transposed);
  CHECK(dl_shape(managed->dl_tensor) == std::vector<std::int64_t>{4, 3});
  CHECK(dl_strides(managed->dl_tensor) == std::vector<std::int64_t>{1, 4});

  const Tensor imported = from_dlpack(managed);
  CHECK(imported.data_ptr() == base.data_ptr());
  CHECK(imported.strides() == Strides{1, 4});
  for (std::int64_t i = 0; i < 4; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      CHECK(imported.at<float>({i, j}) == static_cast<float>(1 + j * 4 + i));
    }
  }
}

TEST_CASE("exporting a tensor sliced with a step keeps its strides, start and values", "[dlpack]") {
  const Tensor base = Tensor::arange({4, 6}, 1.0, 1.0, {DType::Int64});
  const Tensor sliced = base.slice(1, {1, 6, 2});  // columns 1, 3, 5: shape [4, 3], strides [6, 2]
  DLManagedTensor* managed = to_dlpack(sliced);
  CHECK(managed->dl_tensor.data == static_cast<void*>(base.data<std::int64_t>() + 1));
  CHECK(managed->dl_tensor.byte_offset == 0);
  CHECK(dl_strides(managed->dl_tensor) == std::vector<std::int64_t>{6, 2});

  const Tensor imported = from_dlpack(managed);
  CHECK(imported.data_ptr() == sliced.data_ptr());
  CHECK(imported.strides() == Strides{6, 2});
  for (std::int64_t i = 0; i < 4; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      CHECK(imported.at<std::int64_t>({i, j}) == 1 + i * 6 + 1 + 2 * j);
    }
  }
}

TEST_CASE("to_dlpack writes the strides of size-1 dimensions as 1", "[dlpack]") {
  const Tensor row = Tensor::arange({3, 4}, 1.0, 1.0, {DType::Float64}).slice(0, {1, 2});  // [1, 4]
  DLManagedTensor* managed = to_dlpack(row.transpose(0, 1));  // shape [4, 1], strides [1, 4]
  CHECK(dl_strides(managed->dl_tensor) == std::vector<std::int64_t>{1, 1});
  const Tensor imported = from_dlpack(managed);
  for (std::int64_t i = 0; i < 4; ++i) {
    CHECK(imported.at<double>({i, 0}) == static_cast<double>(5 + i));
  }
}

TEST_CASE("a zero-dimensional tensor round-trips through DLPack", "[dlpack]") {
  const Tensor scalar = Tensor::full({}, 7.25, {DType::Float32});
  DLManagedTensor* managed = to_dlpack(scalar);
  CHECK(managed->dl_tensor.ndim == 0);
  const Tensor imported = from_dlpack(managed);
  CHECK(imported.dim() == 0);
  CHECK(imported.value_at_linear(0) == std::complex<double>(7.25, 0.0));
}

TEST_CASE("to_dlpack of an undefined tensor is InvalidArgument", "[dlpack]") {
  CHECK_THROWS_AS(to_dlpack(Tensor()), InvalidArgument);
  CHECK_THROWS_AS(to_dlpack_versioned(Tensor()), InvalidArgument);
}

// ---- versioned export --------------------------------------------------------------------------

TEST_CASE("to_dlpack_versioned writes version 1.1 and sets the read-only flag only when asked",
          "[dlpack]") {
  const Tensor tensor = Tensor::arange({5}, 2.0, 3.0, {DType::Int16});
  DLManagedTensorVersioned* writable = to_dlpack_versioned(tensor);
  DLManagedTensorVersioned* read_only = to_dlpack_versioned(tensor, true);
  CHECK(writable->version.major == 1);
  CHECK(writable->version.minor == 1);
  CHECK(writable->flags == 0);
  CHECK(read_only->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK(read_only->dl_tensor.data == tensor.data_ptr());
  CHECK(tensor.storage().use_count() == 3);
  writable->deleter(writable);
  read_only->deleter(read_only);
  CHECK(tensor.storage().use_count() == 1);
}

// ---- importing foreign memory ------------------------------------------------------------------

TEST_CASE("from_dlpack views a foreign buffer and calls its deleter once, after the last view",
          "[dlpack]") {
  std::vector<float> buffer(2 + 12);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = 10.0f + static_cast<float>(i);
  int deletions = 0;
  const ForeignSpec spec{.data = buffer.data(), .shape = {3, 4}, .byte_offset = 2 * sizeof(float)};

  Tensor imported = from_dlpack(make_foreign<DLManagedTensor>(spec, &deletions));
  CHECK(imported.data_ptr() == static_cast<void*>(buffer.data() + 2));
  CHECK(imported.strides() == Strides{4, 1});  // NULL strides: C-contiguous
  for (std::int64_t i = 0; i < 3; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) {
      CHECK(imported.at<float>({i, j}) == 12.0f + static_cast<float>(4 * i + j));
    }
  }
  buffer[2 + 5] = -1.0f;  // zero-copy: a write to the buffer shows through the tensor
  CHECK(imported.at<float>({1, 1}) == -1.0f);

  Tensor column = imported.transpose(0, 1).select(0, 2);  // elements 2, 6, 10
  Tensor rows = imported.slice(0, {1, 3});
  imported = Tensor();
  CHECK(deletions == 0);
  CHECK(column.at<float>({2}) == 22.0f);
  column = Tensor();
  CHECK(deletions == 0);
  CHECK(rows.at<float>({1, 3}) == 23.0f);
  rows = Tensor();
  CHECK(deletions == 1);
}

TEST_CASE("from_dlpack of a versioned foreign tensor honours its strides and deletes it once",
          "[dlpack]") {
  std::vector<std::int32_t> buffer(6);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = 100 + static_cast<std::int32_t>(i);
  int deletions = 0;
  // Column-major [2, 3]: element (i, j) sits at i + 2 * j.
  const ForeignSpec spec{.data = buffer.data(),
                         .dtype = dl_type(kDLInt, 32),
                         .shape = {2, 3},
                         .strides = std::vector<std::int64_t>{1, 2}};
  {
    const Tensor imported = from_dlpack(make_foreign_versioned(spec, &deletions));
    CHECK(imported.dtype() == DType::Int32);
    CHECK(imported.strides() == Strides{1, 2});
    for (std::int64_t i = 0; i < 2; ++i) {
      for (std::int64_t j = 0; j < 3; ++j) {
        CHECK(imported.at<std::int32_t>({i, j}) == 100 + i + 2 * j);
      }
    }
    CHECK(deletions == 0);
  }
  CHECK(deletions == 1);
}

TEST_CASE("from_dlpack maps every tensortree dtype from its DLPack code and bits", "[dlpack]") {
  std::vector<std::byte> buffer(4 * 16);
  for (const ExpectedDLType& expected : kDLTypeTable) {
    INFO(dtype_name(expected.dtype));
    int deletions = 0;
    const ForeignSpec spec{
        .data = buffer.data(), .dtype = dl_type(expected.code, expected.bits), .shape = {4}};
    CHECK(from_dlpack(make_foreign<DLManagedTensor>(spec, &deletions)).dtype() == expected.dtype);
    CHECK(deletions == 1);
  }
}

TEST_CASE("from_dlpack imports kDLCUDAHost as CPU and kDLCUDA as that CUDA device, zero-copy",
          "[dlpack]") {
  std::vector<float> buffer(8, 1.5f);
  int deletions = 0;
  {
    const ForeignSpec pinned{.data = buffer.data(), .device = dl_device(kDLCUDAHost), .shape = {8}};
    const Tensor imported = from_dlpack(make_foreign<DLManagedTensor>(pinned, &deletions));
    CHECK(imported.device() == Device::cpu());
    for (std::int64_t i = 0; i < 8; ++i) CHECK(imported.at<float>({i}) == 1.5f);
  }
  CHECK(deletions == 1);
  {
    // Never dereferenced: importing only records where the memory is.
    const ForeignSpec on_gpu{
        .data = buffer.data(), .device = dl_device(kDLCUDA, 1), .shape = {2, 4}};
    const Tensor imported = from_dlpack(make_foreign_versioned(on_gpu, &deletions));
    CHECK(imported.device() == Device::cuda(1));
    CHECK(imported.data_ptr() == static_cast<void*>(buffer.data()));
    CHECK(imported.shape() == Shape{2, 4});
  }
  CHECK(deletions == 2);
}

TEST_CASE("from_dlpack accepts an empty tensor with NULL data", "[dlpack]") {
  int deletions = 0;
  {
    const ForeignSpec spec{.data = nullptr, .shape = {0, 3}, .byte_offset = 64};
    const Tensor imported = from_dlpack(make_foreign<DLManagedTensor>(spec, &deletions));
    CHECK(imported.shape() == Shape{0, 3});
    CHECK(imported.numel() == 0);
  }
  CHECK(deletions == 1);
}

TEST_CASE("from_dlpack accepts a newer minor version of DLPack 1", "[dlpack]") {
  float value = 4.5f;
  int deletions = 0;
  const ForeignSpec spec{.data = &value, .shape = {1}};
  {
    const Tensor imported = from_dlpack(make_foreign_versioned(spec, &deletions, 1, 7));
    CHECK(imported.at<float>({0}) == 4.5f);
  }
  CHECK(deletions == 1);
}

TEST_CASE("from_dlpack with a NULL deleter imports the memory and calls nothing", "[dlpack]") {
  std::vector<std::int8_t> buffer{3, 5, 7};
  int deletions = 0;
  DLManagedTensor* managed = make_foreign<DLManagedTensor>(
      {.data = buffer.data(), .dtype = dl_type(kDLInt, 8), .shape = {3}}, &deletions);
  auto* owner = static_cast<ForeignTensor<DLManagedTensor>*>(managed->manager_ctx);
  managed->deleter = nullptr;
  {
    const Tensor imported = from_dlpack(managed);
    for (std::int64_t i = 0; i < 3; ++i) CHECK(imported.at<std::int8_t>({i}) == 3 + 2 * i);
  }
  CHECK(deletions == 0);
  delete owner;
}

// ---- rejected imports leave the tensor with the caller -----------------------------------------

TEST_CASE("from_dlpack rejects another major version without reading past the version field",
          "[dlpack]") {
  // The version ends a readable page and the next page is inaccessible: reading any other field
  // of the struct would crash the test.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(pages != MAP_FAILED);
  REQUIRE(mprotect(static_cast<std::byte*>(pages) + page, page, PROT_NONE) == 0);
  auto* version = reinterpret_cast<DLPackVersion*>(static_cast<std::byte*>(pages) + page -
                                                   sizeof(DLPackVersion));
  auto* managed = reinterpret_cast<DLManagedTensorVersioned*>(version);
  for (std::uint32_t major : {0u, 2u}) {
    version->major = major;
    version->minor = 0;
    check_throws_mentioning<NotSupported>([&] { from_dlpack(managed); },
                                          "major version " + std::to_string(major));
  }
  munmap(pages, 2 * page);
}

TEST_CASE("from_dlpack rejects another major version and leaves the tensor to the caller",
          "[dlpack]") {
  float value = 1.0f;
  int deletions = 0;
  DLManagedTensorVersioned* managed =
      make_foreign_versioned({.data = &value, .shape = {1}}, &deletions, 2, 0);
  CHECK_THROWS_AS(from_dlpack(managed), NotSupported);
  CHECK(deletions == 0);
  managed->deleter(managed);
  CHECK(deletions == 1);
}

TEST_CASE("from_dlpack rejects unsupported dtypes and leaves the tensor to the caller",
          "[dlpack]") {
  std::vector<std::byte> buffer(64);
  const auto with_type = [&](DLDataType type) {
    return ForeignSpec{.data = buffer.data(), .dtype = type, .shape = {4}};
  };
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(kDLFloat, 32, 4)), "lanes");
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(kDLFloat, 8)), "8 bits");
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(kDLInt, 4)), "4 bits");
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(kDLBool, 1)), "'bool'");
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(kDLComplex, 32)), "'complex'");
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(kDLFloat8_e4m3fnuz, 8)),
                                                "float8_e4m3fnuz");
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(kDLOpaqueHandle, 64)),
                                                "opaque handle");
  check_rejected_and_not_consumed<NotSupported>(with_type(dl_type(99, 32)), "code 99");
}

TEST_CASE("from_dlpack rejects unsupported devices and leaves the tensor to the caller",
          "[dlpack]") {
  float value = 1.0f;
  const auto on = [&](DLDevice device) {
    return ForeignSpec{.data = &value, .device = device, .shape = {1}};
  };
  check_rejected_and_not_consumed<NotSupported>(on(dl_device(kDLOpenCL)), "kDLOpenCL");
  check_rejected_and_not_consumed<NotSupported>(on(dl_device(kDLROCM)), "kDLROCM");
  check_rejected_and_not_consumed<NotSupported>(on(dl_device(kDLCUDAManaged)), "kDLCUDAManaged");
  check_rejected_and_not_consumed<NotSupported>(on(dl_device(static_cast<DLDeviceType>(14))),
                                                "device type 14");
  check_rejected_and_not_consumed<InvalidArgument>(on(dl_device(kDLCUDA, -1)), "device_id -1");
}

TEST_CASE("from_dlpack rejects malformed tensors and does not consume them", "[dlpack]") {
  std::vector<float> buffer(16, 2.0f);
  check_rejected_and_not_consumed<InvalidArgument>({.data = buffer.data(), .shape = {2, -3}},
                                                   "negative");
  check_rejected_and_not_consumed<InvalidArgument>({.data = nullptr, .shape = {2, 3}},
                                                   "data is NULL");
  check_rejected_and_not_consumed<NotSupported>(
      {.data = buffer.data(), .shape = {2, 3}, .strides = std::vector<std::int64_t>{3, -1}},
      "stride -1 of dimension 1");
  check_rejected_and_not_consumed<InvalidArgument>(
      {.data = buffer.data(),
       .shape = {2, 2},
       .strides = std::vector<std::int64_t>{INT64_MAX / 2, INT64_MAX / 2}},
      "address space");

  int deletions = 0;
  DLManagedTensor* negative_ndim =
      make_foreign<DLManagedTensor>({.data = buffer.data()}, &deletions);
  negative_ndim->dl_tensor.ndim = -1;
  check_throws_mentioning<InvalidArgument>([&] { from_dlpack(negative_ndim); }, "ndim");
  DLManagedTensor* null_shape = make_foreign<DLManagedTensor>({.data = buffer.data()}, &deletions);
  null_shape->dl_tensor.ndim = 2;
  null_shape->dl_tensor.shape = nullptr;
  check_throws_mentioning<InvalidArgument>([&] { from_dlpack(null_shape); }, "shape is NULL");
  CHECK(deletions == 0);
  negative_ndim->deleter(negative_ndim);
  null_shape->deleter(null_shape);
  CHECK(deletions == 2);
}

TEST_CASE("from_dlpack of a NULL pointer is InvalidArgument", "[dlpack]") {
  CHECK_THROWS_AS(from_dlpack(static_cast<DLManagedTensor*>(nullptr)), InvalidArgument);
  CHECK_THROWS_AS(from_dlpack(static_cast<DLManagedTensorVersioned*>(nullptr)), InvalidArgument);
}

// ---- CUDA --------------------------------------------------------------------------------------

TEST_CASE("a CUDA tensor exports as kDLCUDA of its device and imports back zero-copy",
          "[dlpack][cuda]") {
  if (cuda_device_count() == 0) {
    WARN("no CUDA device: the CUDA round trip was not run");
    return;
  }
  const Tensor on_gpu = Tensor::arange({3, 5}, 1.0, 2.0, {DType::Float32, Device::cuda(0)});
  DLManagedTensorVersioned* managed = to_dlpack_versioned(on_gpu);
  CHECK(managed->dl_tensor.device.device_type == kDLCUDA);
  CHECK(managed->dl_tensor.device.device_id == 0);
  const Tensor imported = from_dlpack(managed);
  CHECK(imported.device() == Device::cuda(0));
  CHECK(imported.data_ptr() == on_gpu.data_ptr());
  check_values(imported.to(Device::cpu()), Tensor::arange({3, 5}, 1.0, 2.0, {DType::Float32}));
}
