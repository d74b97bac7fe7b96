// Zero-copy exchange of tensors with other frameworks (PyTorch, NumPy, CuPy, JAX) through DLPack.
#pragma once

#include <cstdint>

#include "tensortree/detail/dlpack_compat.hpp"
#include "tensortree/export.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

// The DLPack version that to_dlpack_versioned() writes: every field it fills exists in 1.1.
inline constexpr std::uint32_t kDLPackMajorVersion = 1;
inline constexpr std::uint32_t kDLPackMinorVersion = 1;

// ---- export ------------------------------------------------------------------------------------
// The result shares `tensor`'s memory and keeps its storage alive until the consumer calls the
// result's deleter (exactly once). data points at element 0 and byte_offset is 0, as PyTorch
// writes them; strides are always present, those of dimensions of size 0 or 1 written as 1.
// CPU tensors (pinned or not) are kDLCPU with device_id 0; CUDA tensors are kDLCUDA.
// Throws InvalidArgument for an undefined tensor.
TT_API DLManagedTensor* to_dlpack(const Tensor& tensor);
// The same as a DLPack 1.x versioned tensor; `read_only` sets DLPACK_FLAG_BITMASK_READ_ONLY.
TT_API DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor, bool read_only = false);

// ---- import ------------------------------------------------------------------------------------
// Views the producer's memory without copying. On success the returned tensor owns `managed`:
// its deleter runs exactly once, when the last tensor viewing that memory is destroyed (on the
// thread that drops it). A NULL deleter is allowed and then nothing is called.
//
// On failure nothing is consumed: the function throws and `managed` still belongs to the caller,
// who must release it through its deleter.
//   NotSupported:    device other than kDLCPU, kDLCUDAHost (imported as CPU) or kDLCUDA; a type
//                    code/bits with no tensortree dtype; lanes != 1; negative strides;
//                    a versioned tensor whose version.major is not 1.
//   InvalidArgument: NULL `managed`; ndim < 0; NULL shape with ndim > 0; a negative dimension;
//                    NULL data for a non-empty tensor; a negative CUDA device_id; a view whose
//                    byte extent overflows.
// NULL strides mean C-contiguous; byte_offset is honoured.
TT_API Tensor from_dlpack(DLManagedTensor* managed);
// version.major is checked before any other field is read, since another major version may lay
// the struct out differently; after that refusal the caller still releases `managed` through its
// deleter, which DLPack keeps in place across major versions. tensortree tensors are always
// writable: a tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY is imported, and the caller must not
// write through it.
TT_API Tensor from_dlpack(DLManagedTensorVersioned* managed);

}  // namespace tensortree
