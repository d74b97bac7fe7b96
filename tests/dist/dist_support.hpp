// What distributed tests need from the harness: who am I, how many are we, and helpers that keep
// every rank in step (a test that fails on one rank must not leave its peers blocked).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "tensortree/dist_context.hpp"

namespace tensortree::test {

// The process's one DistributedContext: the harness creates it right after MPI_Init_thread (it
// adopts that MPI) and destroys it before MPI_Finalize, so tests never own MPI's lifetime.
const DistributedContext& context();

// Owns that context for its lifetime (the harness's main holds one).
class ContextScope {
 public:
  ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  ~ContextScope();
};

int world_rank();
int world_size();
MPI_Comm world_comm();
// The thread support level MPI_Init_thread granted (the harness asks for MPI_THREAD_MULTIPLE).
int mpi_thread_level();

// True on every rank when `local_ok` is true on every rank. Use it before a REQUIRE that
// guards further communication, so that all ranks stop together.
bool on_every_rank(bool local_ok);
void barrier();

// A non-zero value that names the rank and the element it belongs to: 1000 * (rank + 1) + index + 1.
// Distinct across ranks for index < 1000 and exact in float32 for up to 16000 ranks.
double rank_value(int rank, std::int64_t index);

// The rank before/after `rank` on a ring of all ranks.
int left_neighbour(int rank);
int right_neighbour(int rank);

}  // namespace tensortree::test
