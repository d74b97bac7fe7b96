// The DLPack 1.x ABI on any dlpack/dlpack.h: older headers (Debian ships 0.6) lack the versioned
// tensor and the newer type codes, so they are defined here exactly as dlpack.h 1.1 defines them,
// in the global namespace where dlpack.h puts them. Included by tensortree/dlpack.hpp.
#pragma once

#include <cstdint>

#include <dlpack/dlpack.h>

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
