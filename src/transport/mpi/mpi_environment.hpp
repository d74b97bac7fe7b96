// What the layers above see of transport/mpi, without <mpi.h>: MPI's lifetime for a
// DistributedContext, bootstraps over MPI_COMM_WORLD, and the MPI backend of a group whose
// bootstrap is MPI's. A build without MPI compiles mpi_absent.cpp instead, whose every entry point
// throws NotSupported.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "comm/bootstrap.hpp"
#include "comm/engine.hpp"

namespace tensortree::detail {

// Starts MPI (MPI_Init_thread) unless the program already has, and finalises it only if it
// started it. While it lives, MPI_COMM_WORLD returns errors instead of aborting the job (Open MPI
// raises the errors of nonblocking collectives there); the program's handler comes back after.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  ~MpiEnvironment();

  // A bootstrap over a communicator of its own, duplicated from MPI_COMM_WORLD: its traffic never
  // meets the program's. Collective over the world.
  std::unique_ptr<Bootstrap> world_bootstrap(std::chrono::milliseconds timeout) const;
  // This rank's index among the ranks that share its host's memory, and their number.
  // Collective over the world.
  std::pair<int, int> local_rank_and_size() const;

  // Over TCP, Open MPI 4.1's MPI_Finalize can wait forever for traffic to a rank that died (seen
  // in one of several runs of tests/dist/peer_death); a process whose world was aborted ends
  // without it, which the launcher's recovery mode accepts.
  void leave_unfinalized();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The MPI transport over the communicator of `bootstrap`, which must be an MPI bootstrap
// (NotSupported otherwise). `timeout` bounds its waits, `max_message_bytes` its unknown-length
// receives.
std::shared_ptr<Engine> make_mpi_backend(Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                                          std::uint64_t max_message_bytes);

}  // namespace tensortree::detail
