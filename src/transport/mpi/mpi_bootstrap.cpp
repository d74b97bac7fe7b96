#include "transport/mpi/mpi_bootstrap.hpp"

#include <climits>
#include <string>
#include <utility>

#include "transport/mpi/mpi_check.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

int byte_count(std::size_t nbytes, const char* operation) {
  if (nbytes > static_cast<std::size_t>(INT_MAX)) {
    throw InvalidArgument(std::string("bootstrap ") + operation + " of " + std::to_string(nbytes) +
                          " bytes: the bootstrap carries small messages only");
  }
  return static_cast<int>(nbytes);
}

}  // namespace

MpiBootstrap::MpiBootstrap(MpiComm comm) : comm_(std::move(comm)) {
  TT_MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  TT_MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
  TT_MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
}

std::vector<std::byte> MpiBootstrap::all_gather(std::span<const std::byte> mine) {
  const int count = byte_count(mine.size() * static_cast<std::size_t>(size_), "all_gather");
  std::vector<std::byte> all(static_cast<std::size_t>(count));
  TT_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                             static_cast<int>(mine.size()), MPI_BYTE, comm_.get()));
  return all;
}

void MpiBootstrap::broadcast(std::span<std::byte> bytes, int root) {
  TT_MPI_CHECK(MPI_Bcast(bytes.data(), byte_count(bytes.size(), "broadcast"), MPI_BYTE, root, comm_.get()));
}

void MpiBootstrap::barrier() { TT_MPI_CHECK(MPI_Barrier(comm_.get())); }

std::unique_ptr<Bootstrap> MpiBootstrap::split(int color, int key) {
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_split(comm_.get(), color < 0 ? MPI_UNDEFINED : color, key, &raw));
  if (raw == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiBootstrap>(MpiComm(raw));
}

MpiComm duplicate_comm(MPI_Comm comm) {
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_dup(comm, &raw));
  return MpiComm(raw);
}

}  // namespace tensortree::detail
