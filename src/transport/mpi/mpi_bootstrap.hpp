// MpiBootstrap: the Bootstrap over one MPI communicator, which it owns. The MPI transports of the
// same group borrow that communicator (comm()): its blocking rounds and their nonblocking
// operations are ordered alike on every rank, as MPI requires of collectives on one communicator.
#pragma once

#include <mpi.h>

#include "comm/bootstrap.hpp"
#include "transport/mpi/mpi_handles.hpp"

namespace tensortree::detail {

class MpiBootstrap final : public Bootstrap {
 public:
  // Takes `comm` and makes its errors returnable, for TT_MPI_CHECK to report.
  explicit MpiBootstrap(MpiComm comm);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::byte> all_gather(std::span<const std::byte> mine) override;
  void broadcast(std::span<std::byte> bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Bootstrap> split(int color, int key) override;

  MPI_Comm comm() const { return comm_.get(); }

 private:
  MpiComm comm_;
  int rank_ = -1;
  int size_ = 0;
};

// A duplicate of `comm` (a communicator of its own, whose traffic never meets the original's).
MpiComm duplicate_comm(MPI_Comm comm);

}  // namespace tensortree::detail
