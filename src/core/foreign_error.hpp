// Shared by the per-API check macros (CUDA, NCCL, MPI): one way to turn a foreign status into
// a BackendError that names the API, the failing call, its message and where it happened.
#pragma once

#include <string_view>

namespace tensortree::detail {

[[noreturn]] void throw_foreign_error(std::string_view api, std::string_view call,
                                      std::string_view message, long code,
                                      const char* file, int line);

}  // namespace tensortree::detail

// The body of every per-API check macro (TT_CUDA_CHECK, TT_NCCL_CHECK, TT_MPI_CHECK): evaluates
// `call` once and, unless it returned `success`, hands the status, the call's text and file:line
// to `thrower`, which throws. The text comes from the caller's macro, before its argument's own
// macros (MPI_COMM_WORLD, ...) are expanded.
#define TT_FOREIGN_CHECK(call, call_text, success, thrower)         \
  do {                                                              \
    const auto tt_foreign_status_ = (call);                         \
    if (tt_foreign_status_ != (success)) {                          \
      thrower(tt_foreign_status_, call_text, __FILE__, __LINE__);   \
    }                                                               \
  } while (0)
