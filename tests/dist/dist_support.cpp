#include "dist_support.hpp"

#include <memory>
#include <string>

#include "tensortree/error.hpp"

namespace tensortree::test {

namespace {

void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) {
    throw BackendError(std::string(call) + " failed with MPI error code " + std::to_string(status));
  }
}

std::unique_ptr<DistributedContext>& shared_context() {
  static std::unique_ptr<DistributedContext> context;
  return context;
}

}  // namespace

ContextScope::ContextScope() { shared_context() = std::make_unique<DistributedContext>(); }

ContextScope::~ContextScope() { shared_context().reset(); }

const DistributedContext& context() {
  if (!shared_context()) throw InvalidArgument("no DistributedContext: the harness's ContextScope is not alive");
  return *shared_context();
}

int world_rank() {
  int rank = -1;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  return rank;
}

int world_size() {
  int size = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  return size;
}

MPI_Comm world_comm() { return MPI_COMM_WORLD; }

int mpi_thread_level() {
  int level = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread");
  return level;
}

bool on_every_rank(bool local_ok) {
  int ok = local_ok ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), "MPI_Allreduce");
  return ok != 0;
}

void barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

double rank_value(int rank, std::int64_t index) {
  return 1000.0 * (rank + 1) + static_cast<double>(index) + 1.0;
}

int left_neighbour(int rank) { return (rank + world_size() - 1) % world_size(); }

int right_neighbour(int rank) { return (rank + 1) % world_size(); }

}  // namespace tensortree::test
