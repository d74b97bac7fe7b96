// TT_MPI_CHECK(call): throws BackendError with MPI's message for the status, the call and file:line.
// Communicators the library creates return errors instead of aborting (MPI_ERRORS_RETURN), so
// failures reach this check.
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>

#include "core/foreign_error.hpp"
#include "core/text_format.hpp"

namespace tensortree::detail {

// The failing call is reported with the world rank that made it: in a job of many ranks the
// message alone does not say where it came from.
[[noreturn]] inline void throw_mpi_error(int status, const char* call, const char* file, int line) {
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(status, message, &length) != MPI_SUCCESS) length = 0;
  int world_rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const std::string where = fmt::format("{} on world rank {}", call, world_rank);
  throw_foreign_error("MPI", where, std::string_view(message, static_cast<std::size_t>(length)), status, file,
                      line);
}

}  // namespace tensortree::detail

#define TT_MPI_CHECK(call) TT_FOREIGN_CHECK(call, #call, MPI_SUCCESS, ::tensortree::detail::throw_mpi_error)
