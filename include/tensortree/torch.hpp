// The libtorch bridge: tensortree tensors and trees as ATen tensors and back, without copying.
// Header-only and optional (Meson feature `torch`): include it in code that links libtorch; the
// library itself never depends on libtorch. Both directions go through DLPack, so ownership is
// DLPack's: the tensor handed over keeps the other side's memory alive, and the memory is freed
// exactly once, when the last tensor of either side that views it is gone.
//
// Dtypes: every dtype both sides have. bool crosses as a uint8 view (libtorch before 2.0 refuses
// bool in DLPack); dtypes the installed libtorch lacks (float8, uint16/32/64 before 2.3) are
// NotSupported, as are CUDA tensors when libtorch was built without CUDA.
#pragma once

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <ATen/core/Dict.h>

#include <map>
#include <string>
#include <utility>

#include "tensortree/dlpack.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

namespace detail {

// The ATen dtype a tensortree dtype crosses as; NotSupported where this libtorch has none.
inline at::ScalarType torch_dtype(DType dtype) {
  switch (dtype) {
    case DType::Bool: return at::kBool;
    case DType::UInt8: return at::kByte;
    case DType::Int8: return at::kChar;
    case DType::Int16: return at::kShort;
    case DType::Int32: return at::kInt;
    case DType::Int64: return at::kLong;
    case DType::Float16: return at::kHalf;
    case DType::BFloat16: return at::kBFloat16;
    case DType::Float32: return at::kFloat;
    case DType::Float64: return at::kDouble;
    case DType::Complex64: return at::kComplexFloat;
    case DType::Complex128: return at::kComplexDouble;
    default: break;
  }
  throw NotSupported(std::string("to_torch: this libtorch has no dtype for ") + std::string(dtype_name(dtype)));
}

// The same memory seen as another dtype of the same item size.
inline Tensor reinterpret(const Tensor& tensor, DType dtype) {
  return Tensor(tensor.storage(), tensor.byte_offset(), dtype, tensor.shape(), tensor.strides());
}

inline void check_torch_device(Device device, const char* operation) {
  if (device.is_cuda() && !at::hasCUDA()) {
    throw NotSupported(std::string(operation) + ": this libtorch was built without CUDA, the tensor is on " +
                       device.str());
  }
}

}  // namespace detail

// An ATen tensor viewing `tensor`'s memory (same shape, strides, dtype and device).
inline at::Tensor to_torch(const Tensor& tensor) {
  if (!tensor.defined()) throw InvalidArgument("to_torch: the tensor is undefined");
  (void)detail::torch_dtype(tensor.dtype());
  detail::check_torch_device(tensor.device(), "to_torch");
  const bool is_bool = tensor.dtype() == DType::Bool;
  // fromDLPack takes ownership at once: from here on the deleter is libtorch's to call.
  at::Tensor result = at::fromDLPack(to_dlpack(is_bool ? detail::reinterpret(tensor, DType::UInt8) : tensor));
  return is_bool ? result.view(at::kBool) : result;
}

// A tensortree tensor viewing `tensor`'s memory; keeps it alive as long as any view of it lives.
inline Tensor from_torch(const at::Tensor& tensor) {
  if (!tensor.defined()) throw InvalidArgument("from_torch: the tensor is undefined");
  const bool is_bool = tensor.scalar_type() == at::kBool;
  DLManagedTensor* managed = at::toDLPack(is_bool ? tensor.view(at::kByte) : tensor);
  try {
    Tensor result = from_dlpack(managed);
    return is_bool ? detail::reinterpret(result, DType::Bool) : result;
  } catch (...) {
    managed->deleter(managed);  // from_dlpack consumes nothing when it throws
    throw;
  }
}

// Every leaf of `tree` under its dotted path ("next.obs"), as views.
inline std::map<std::string, at::Tensor> to_torch_map(const TensorTree& tree) {
  std::map<std::string, at::Tensor> out;
  tree.for_each_leaf([&](const Path& path, const Tensor& leaf) { out.emplace(path_str(path), to_torch(leaf)); });
  return out;
}

// The same as a c10::Dict, what TorchScript modules take, in the tree's iteration order.
inline c10::Dict<std::string, at::Tensor> to_torch_dict(const TensorTree& tree) {
  c10::Dict<std::string, at::Tensor> out;
  tree.for_each_leaf([&](const Path& path, const Tensor& leaf) { out.insert(path_str(path), to_torch(leaf)); });
  return out;
}

// A tree of `batch_size` whose leaves view the ATen tensors; dotted names become nested keys.
inline TensorTree from_torch(const std::map<std::string, at::Tensor>& leaves, Shape batch_size) {
  TensorTree tree(std::move(batch_size));
  for (const auto& [name, leaf] : leaves) tree.set(name, from_torch(leaf));
  return tree;
}

}  // namespace tensortree
