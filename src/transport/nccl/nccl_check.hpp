// TT_NCCL_CHECK(call): throws BackendError with NCCL's text for the status (plus its last-error
// detail where this NCCL has ncclGetLastError), the call and file:line. Also the one place that
// names what each NCCL version offers, as TT_NCCL_HAS_* macros.
#pragma once

#include <nccl.h>

#include <string>

#include "core/foreign_error.hpp"
#include "core/text_format.hpp"

#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 7, 0)
#error "the NCCL backend needs NCCL 2.7 or newer (ncclSend / ncclRecv)"
#endif

// NCCL_VERSION changed its encoding at 2.9; the header's own macro knows both, so comparisons
// against it are right on either side of the change.
#define TT_NCCL_AT_LEAST(major, minor, patch) (NCCL_VERSION_CODE >= NCCL_VERSION(major, minor, patch))

#define TT_NCCL_HAS_AVG TT_NCCL_AT_LEAST(2, 10, 0)
#define TT_NCCL_HAS_LAST_ERROR TT_NCCL_AT_LEAST(2, 13, 0)
// nccl.h declares ncclBfloat16 only when CUDA's bfloat16 header is present (CUDA 11+), and the
// float8 types only with CUDA 11.8's float8 header; nccl-tests guards them the same way.
#if TT_NCCL_AT_LEAST(2, 10, 0) && defined(__CUDA_BF16_TYPES_EXIST__)
#define TT_NCCL_HAS_BFLOAT16 1
#else
#define TT_NCCL_HAS_BFLOAT16 0
#endif
#if TT_NCCL_AT_LEAST(2, 24, 0) && defined(__CUDA_FP8_TYPES_EXIST__)
#define TT_NCCL_HAS_FLOAT8 1
#else
#define TT_NCCL_HAS_FLOAT8 0
#endif

namespace tensortree::detail {

// NCCL's name for the status, and the detail it logged for the most recent failure when it has one.
inline std::string nccl_error_text(ncclResult_t status) {
  const char* name = ncclGetErrorString(status);
#if TT_NCCL_HAS_LAST_ERROR
  // The communicator argument is unused: NCCL keeps one process-wide last error.
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && *detail != '\0') return fmt::format("{}: {}", name, detail);
#endif
  return name;
}

[[noreturn]] inline void throw_nccl_error(ncclResult_t status, const char* call, const char* file, int line) {
  throw_foreign_error("NCCL", call, nccl_error_text(status), static_cast<long>(status), file, line);
}

}  // namespace tensortree::detail

#define TT_NCCL_CHECK(call) TT_FOREIGN_CHECK(call, #call, ncclSuccess, ::tensortree::detail::throw_nccl_error)
