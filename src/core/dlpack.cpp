#include "tensortree/dlpack.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/checked_math.hpp"
#include "core/cuda_api.hpp"
#include "core/text_format.hpp"

namespace tensortree {

namespace {

// The layout of dlpack.h 1.1 on LP64, whichever header (or our definitions) declared it.
static_assert(sizeof(DLPackVersion) == 8);
static_assert(sizeof(DLDataType) == 4);
static_assert(sizeof(void*) != 8 || sizeof(DLTensor) == 48);
static_assert(sizeof(void*) != 8 || offsetof(DLManagedTensorVersioned, manager_ctx) == 8);
static_assert(sizeof(void*) != 8 || offsetof(DLManagedTensorVersioned, deleter) == 16);
static_assert(sizeof(void*) != 8 || offsetof(DLManagedTensorVersioned, flags) == 24);
static_assert(sizeof(void*) != 8 || offsetof(DLManagedTensorVersioned, dl_tensor) == 32);

// ---- dtypes ------------------------------------------------------------------------------------

std::uint8_t dl_type_code(DType dtype) {
  switch (dtype) {
    case DType::Bool: return kDLBool;
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: return kDLUInt;
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: return kDLInt;
    case DType::Float16:
    case DType::Float32:
    case DType::Float64: return kDLFloat;
    case DType::BFloat16: return kDLBfloat;
    case DType::Complex64:
    case DType::Complex128: return kDLComplex;
    case DType::Float8_e4m3fn: return kDLFloat8_e4m3fn;
    case DType::Float8_e5m2: return kDLFloat8_e5m2;
  }
  throw InvalidArgument(fmt::format("to_dlpack: invalid dtype value {}", static_cast<int>(dtype)));
}

DLDataType dl_dtype_of(DType dtype) {
  DLDataType dl{};
  dl.code = dl_type_code(dtype);
  dl.bits = static_cast<std::uint8_t>(itemsize(dtype) * 8);  // bool is stored in 8 bits
  dl.lanes = 1;
  return dl;
}

std::string type_code_name(std::uint8_t code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    case kDLFloat8_e3m4: return "float8_e3m4";
    case kDLFloat8_e4m3: return "float8_e4m3";
    case kDLFloat8_e4m3b11fnuz: return "float8_e4m3b11fnuz";
    case kDLFloat8_e4m3fn: return "float8_e4m3fn";
    case kDLFloat8_e4m3fnuz: return "float8_e4m3fnuz";
    case kDLFloat8_e5m2: return "float8_e5m2";
    case kDLFloat8_e5m2fnuz: return "float8_e5m2fnuz";
    case kDLFloat8_e8m0fnu: return "float8_e8m0fnu";
    case kDLFloat6_e2m3fn: return "float6_e2m3fn";
    case kDLFloat6_e3m2fn: return "float6_e3m2fn";
    case kDLFloat4_e2m1fn: return "float4_e2m1fn";
    default: return "unknown";
  }
}

std::string describe(DLDataType dl) {
  return fmt::format("(code {} '{}', {} bits, {} lanes)", dl.code, type_code_name(dl.code), dl.bits, dl.lanes);
}

// The inverse of dl_dtype_of, derived from it so that the two directions cannot disagree.
DType dtype_from_dl(DLDataType dl) {
  if (dl.lanes != 1) {
    throw NotSupported(fmt::format("from_dlpack: DLPack dtype {} is a vector type; tensortree needs lanes == 1",
                                   describe(dl)));
  }
  for (DType dtype : kAllDTypes) {
    const DLDataType candidate = dl_dtype_of(dtype);
    if (candidate.code == dl.code && candidate.bits == dl.bits) return dtype;
  }
  throw NotSupported(fmt::format("from_dlpack: DLPack dtype {} has no tensortree dtype", describe(dl)));
}

// ---- devices -----------------------------------------------------------------------------------

DLDevice dl_device_of(Device device) {
  DLDevice dl{};
  switch (device.type()) {
    case DeviceType::CPU:
      dl.device_type = kDLCPU;
      dl.device_id = 0;
      return dl;
    case DeviceType::CUDA:
      dl.device_type = kDLCUDA;
      dl.device_id = device.index() < 0 ? cuda::current_device() : device.index();
      return dl;
  }
  throw InvalidArgument(fmt::format("to_dlpack: invalid device type value {}", static_cast<int>(device.type())));
}

std::string device_type_name(int type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    default: return fmt::format("device type {}", type);
  }
}

Device device_from_dl(DLDevice dl) {
  const int type = static_cast<int>(dl.device_type);
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: plain host memory to the CPU
      return Device::cpu();
    case kDLCUDA:
      if (dl.device_id < 0) {
        throw InvalidArgument(fmt::format("from_dlpack: kDLCUDA tensor has negative device_id {}", dl.device_id));
      }
      return Device::cuda(dl.device_id);
    default:
      throw NotSupported(fmt::format("from_dlpack: DLPack device {} is not supported (tensortree imports kDLCPU, "
                                     "kDLCUDAHost and kDLCUDA)", device_type_name(type)));
  }
}

// ---- layout of an imported tensor --------------------------------------------------------------

struct ImportedLayout {
  DType dtype;
  Device device;
  Shape shape;
  Strides strides;
  std::size_t byte_offset;
  std::size_t storage_bytes;  // byte_offset plus the bytes the view reaches
};

Shape read_shape(const DLTensor& dl) {
  if (dl.ndim < 0) {
    throw InvalidArgument(fmt::format("from_dlpack: ndim is negative ({})", dl.ndim));
  }
  if (dl.ndim > 0 && dl.shape == nullptr) {
    throw InvalidArgument(fmt::format("from_dlpack: shape is NULL for a tensor of {} dimensions", dl.ndim));
  }
  Shape shape(dl.shape, dl.shape + dl.ndim);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      throw InvalidArgument(fmt::format("from_dlpack: dimension {} of shape {} is negative", d, shape_str(shape)));
    }
  }
  numel_of(shape);  // rejects a shape whose element count overflows
  return shape;
}

// Older producers send NULL strides for a compact row-major tensor; PyTorch accepts them too.
Strides read_strides(const DLTensor& dl, const Shape& shape) {
  if (dl.strides == nullptr) return contiguous_strides(shape);
  Strides strides(dl.strides, dl.strides + dl.ndim);
  for (std::size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] < 0) {
      throw NotSupported(fmt::format("from_dlpack: stride {} of dimension {} is negative; tensortree views need "
                                     "strides >= 0", strides[d], d));
    }
  }
  return strides;
}

// Bytes from the first element to just past the last one the view reaches; 0 for an empty view.
std::size_t view_extent(const Shape& shape, const Strides& strides, std::size_t itemsize) {
  const std::optional<std::size_t> bytes = detail::view_extent_bytes(shape, strides, itemsize);
  if (!bytes) {
    throw InvalidArgument(fmt::format("from_dlpack: shape {} with strides {} reaches past the address space",
                                      shape_str(shape), shape_str(strides)));
  }
  return *bytes;
}

ImportedLayout read_layout(const DLTensor& dl) {
  ImportedLayout layout{
      dtype_from_dl(dl.dtype), device_from_dl(dl.device), read_shape(dl), {}, 0, 0};
  layout.strides = read_strides(dl, layout.shape);
  const std::size_t extent = view_extent(layout.shape, layout.strides, itemsize(layout.dtype));
  if (extent > 0 && dl.data == nullptr) {
    throw InvalidArgument(fmt::format("from_dlpack: data is NULL for a tensor of shape {}", shape_str(layout.shape)));
  }
  // An empty tensor may come with NULL data, and an offset from NULL is no address.
  layout.byte_offset = dl.data == nullptr ? 0 : dl.byte_offset;
  const std::optional<std::size_t> storage_bytes = detail::checked_add<std::size_t>(layout.byte_offset, extent);
  if (!storage_bytes) {
    throw InvalidArgument(fmt::format("from_dlpack: byte_offset {} plus the view's {} bytes overflows", dl.byte_offset,
                                      extent));
  }
  layout.storage_bytes = *storage_bytes;
  return layout;
}

// ---- import ------------------------------------------------------------------------------------

// Shared by the adopted Storage's deleter. The producer's deleter runs only once the import has
// succeeded: if building the tensor throws, the Storage is destroyed but the managed tensor must
// stay with the caller.
template <class Managed>
class ProducerOwnership {
 public:
  explicit ProducerOwnership(Managed* managed) : managed_(managed) {}
  void take() noexcept { taken_ = true; }
  void release() noexcept {
    if (taken_ && managed_->deleter != nullptr) managed_->deleter(managed_);
  }

 private:
  Managed* managed_;
  bool taken_ = false;
};

template <class Managed>
Tensor import_managed(Managed* managed) {
  const DLTensor& dl = managed->dl_tensor;
  ImportedLayout layout = read_layout(dl);
  auto ownership = std::make_shared<ProducerOwnership<Managed>>(managed);
  auto storage = Storage::adopt(dl.data, layout.storage_bytes, layout.device,
                                [ownership](void*) { ownership->release(); });
  Tensor tensor(std::move(storage), layout.byte_offset, layout.dtype, std::move(layout.shape),
                std::move(layout.strides));
  ownership->take();
  return tensor;
}

// ---- export ------------------------------------------------------------------------------------

// One allocation per export: the Tensor copy keeps the storage alive, shape and strides are the
// arrays the DLTensor points into, and the deleter frees all of it.
template <class Managed>
struct ExportContext {
  Tensor tensor;
  Shape shape;
  Strides strides;
  Managed managed{};
};

template <class Managed>
void delete_export_context(Managed* self) noexcept {
  delete static_cast<ExportContext<Managed>*>(self->manager_ctx);
}

// Strides of dimensions of size 0 or 1 never matter; some consumers read them to judge
// contiguity, so they are written as 1 (PyTorch does the same, pytorch#83069).
Strides exported_strides(const Tensor& tensor) {
  Strides strides = tensor.strides();
  for (std::size_t d = 0; d < strides.size(); ++d) {
    if (tensor.shape()[d] < 2) strides[d] = 1;
  }
  return strides;
}

template <class Managed>
Managed* export_tensor(const Tensor& tensor, const char* function) {
  if (!tensor.defined()) throw InvalidArgument(fmt::format("{}: the tensor is undefined", function));
  auto context = std::make_unique<ExportContext<Managed>>();
  context->tensor = tensor;
  context->shape = tensor.shape();
  context->strides = exported_strides(tensor);
  DLTensor& dl = context->managed.dl_tensor;
  dl.data = tensor.data_ptr();
  dl.device = dl_device_of(tensor.device());
  dl.ndim = static_cast<std::int32_t>(tensor.dim());
  dl.dtype = dl_dtype_of(tensor.dtype());
  dl.shape = context->shape.data();
  dl.strides = context->strides.data();
  dl.byte_offset = 0;
  context->managed.manager_ctx = context.get();
  context->managed.deleter = &delete_export_context<Managed>;
  return &context.release()->managed;
}

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& tensor) {
  return export_tensor<DLManagedTensor>(tensor, "to_dlpack");
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor, bool read_only) {
  DLManagedTensorVersioned* managed =
      export_tensor<DLManagedTensorVersioned>(tensor, "to_dlpack_versioned");
  managed->version.major = kDLPackMajorVersion;
  managed->version.minor = kDLPackMinorVersion;
  managed->flags = read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return managed;
}

Tensor from_dlpack(DLManagedTensor* managed) {
  if (managed == nullptr) throw InvalidArgument("from_dlpack: the DLManagedTensor pointer is NULL");
  return import_managed(managed);
}

Tensor from_dlpack(DLManagedTensorVersioned* managed) {
  if (managed == nullptr) {
    throw InvalidArgument("from_dlpack: the DLManagedTensorVersioned pointer is NULL");
  }
  // Only `version` is laid out the same in every major version; nothing else may be read first.
  if (managed->version.major != kDLPackMajorVersion) {
    throw NotSupported(fmt::format("from_dlpack: DLPack major version {} is not supported (tensortree reads major "
                                   "version {}); the tensor was not consumed", managed->version.major,
                                   kDLPackMajorVersion));
  }
  return import_managed(managed);
}

}  // namespace tensortree
