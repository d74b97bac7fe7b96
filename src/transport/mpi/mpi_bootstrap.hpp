// MpiBootstrap: the Bootstrap over one MPI communicator, which it owns. The MPI transports of the
// same group borrow that communicator (comm()): its blocking rounds and their nonblocking
// operations are ordered alike on every rank, as MPI requires of collectives on one communicator.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "comm/bootstrap.hpp"
#include "transport/mpi/mpi_handles.hpp"

namespace tensortree::detail {

class MpiBootstrap final : public Bootstrap {
 public:
  // Takes `comm` and makes its errors returnable, for TT_MPI_CHECK to report. Every round throws
  // Timeout once it has waited `timeout` for the other members (sub-groups inherit it).
  MpiBootstrap(MpiComm comm, std::chrono::milliseconds timeout);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::byte> all_gather(std::span<const std::byte> mine) override;
  void broadcast(std::span<std::byte> bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Bootstrap> split(int color, int key) override;

  MPI_Comm comm() const { return comm_.get(); }

 private:
  // Waits for `request` within the timeout; past it, abandons the request with `buffers` (what it
  // reads and writes) and throws Timeout naming `operation`.
  void wait(MPI_Request request, std::vector<std::shared_ptr<std::vector<std::byte>>> buffers,
            const char* operation) const;

  MpiComm comm_;
  int rank_ = -1;
  int size_ = 0;
  std::chrono::milliseconds timeout_;
};

// A duplicate of `comm` (a communicator of its own, whose traffic never meets the original's).
MpiComm duplicate_comm(MPI_Comm comm);

}  // namespace tensortree::detail
