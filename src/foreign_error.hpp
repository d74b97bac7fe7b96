// Shared by the per-API check macros (CUDA, NCCL, MPI): one way to turn a foreign status into
// a BackendError that names the API, the failing call, its message and where it happened.
#pragma once

#include <string_view>

namespace tensortree::detail {

[[noreturn]] void throw_foreign_error(std::string_view api, std::string_view call,
                                      std::string_view message, long code,
                                      const char* file, int line);

}  // namespace tensortree::detail
