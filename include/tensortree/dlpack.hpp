// Zero-copy exchange of tensors with other frameworks (PyTorch, NumPy, CuPy, JAX) through DLPack.
#pragma once

#include <cstdint>

#include <dlpack/dlpack.h>

#include "tensortree/tensor.hpp"

#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION != 1
#error "tensortree implements the DLPack 1.x ABI; this dlpack/dlpack.h has another major version"
#endif

// Headers before DLPack 1.0 (Debian ships 0.6) lack the versioned ABI. These definitions are
// exactly those of dlpack.h 1.1, so code written against 1.x compiles the same either way.
#if !defined(DLPACK_MAJOR_VERSION)
extern "C" {

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

}  // extern "C"

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
#endif

// Type codes added after the system header. They are constants, not enumerators, because an old
// header's DLDataTypeCode cannot be extended; DLDataType::code is a uint8_t either way.
#if !defined(DLPACK_MAJOR_VERSION) && (!defined(DLPACK_VERSION) || DLPACK_VERSION < 80)
inline constexpr uint8_t kDLBool = 6U;
#endif
#if !defined(DLPACK_MAJOR_VERSION) || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1)
inline constexpr uint8_t kDLFloat8_e3m4 = 7U;
inline constexpr uint8_t kDLFloat8_e4m3 = 8U;
inline constexpr uint8_t kDLFloat8_e4m3b11fnuz = 9U;
inline constexpr uint8_t kDLFloat8_e4m3fn = 10U;
inline constexpr uint8_t kDLFloat8_e4m3fnuz = 11U;
inline constexpr uint8_t kDLFloat8_e5m2 = 12U;
inline constexpr uint8_t kDLFloat8_e5m2fnuz = 13U;
inline constexpr uint8_t kDLFloat8_e8m0fnu = 14U;
inline constexpr uint8_t kDLFloat6_e2m3fn = 15U;
inline constexpr uint8_t kDLFloat6_e3m2fn = 16U;
inline constexpr uint8_t kDLFloat4_e2m1fn = 17U;
#endif

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
DLManagedTensor* to_dlpack(const Tensor& tensor);
// The same as a DLPack 1.x versioned tensor; `read_only` sets DLPACK_FLAG_BITMASK_READ_ONLY.
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor, bool read_only = false);

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
Tensor from_dlpack(DLManagedTensor* managed);
// version.major is checked before any other field is read, since another major version may lay
// the struct out differently; after that refusal the caller still releases `managed` through its
// deleter, which DLPack keeps in place across major versions. tensortree tensors are always
// writable: a tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY is imported, and the caller must not
// write through it.
Tensor from_dlpack(DLManagedTensorVersioned* managed);

}  // namespace tensortree
