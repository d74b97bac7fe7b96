// TT_UCX_CHECK(call): throws BackendError with UCX's text for the status, the call and file:line.
#pragma once

#include <ucp/api/ucp.h>

#include "core/foreign_error.hpp"

namespace tensortree::detail {

[[noreturn]] inline void throw_ucx_error(ucs_status_t status, const char* call, const char* file, int line) {
  throw_foreign_error("UCX", call, ucs_status_string(status), status, file, line);
}

}  // namespace tensortree::detail

#define TT_UCX_CHECK(call) TT_FOREIGN_CHECK(call, #call, UCS_OK, ::tensortree::detail::throw_ucx_error)
