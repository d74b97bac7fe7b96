#include "transport/mpi/mpi_environment.hpp"

#include <mpi.h>

#include <memory>
#include <utility>

#include "transport/mpi/mpi_backend.hpp"
#include "transport/mpi/mpi_bootstrap.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "transport/mpi/mpi_handles.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// Owns MPI's lifetime when the context started it; otherwise adopts the program's MPI.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) {
    int initialized = 0;
    TT_MPI_CHECK(MPI_Initialized(&initialized));
    if (mpi_is_finalized()) throw BackendError("MPI has already been finalised; it cannot be started again");
    if (initialized) return;
    int provided = MPI_THREAD_SINGLE;
    // MPI grants the highest level it has at or below MULTIPLE (SERIALIZED at least, in practice).
    TT_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    owns_mpi_ = true;
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() {
    if (owns_mpi_ && !mpi_is_finalized()) MPI_Finalize();
  }

  void leave_unfinalized() { owns_mpi_ = false; }

 private:
  bool owns_mpi_ = false;
};

// Open MPI (4.1) raises the errors of a nonblocking collective's internal steps (a truncated
// message inside an all_reduce whose ranks passed different lengths) on MPI_COMM_WORLD, not on the
// communicator the collective ran on, so with world's default handler a mismatch would abort the
// whole job. While the context lives, world's errors are returned instead (to the library, which
// throws them); the program's own handler comes back afterwards.
class WorldErrorsReturned {
 public:
  WorldErrorsReturned() {
    TT_MPI_CHECK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &previous_));
    TT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  }
  WorldErrorsReturned(const WorldErrorsReturned&) = delete;
  WorldErrorsReturned& operator=(const WorldErrorsReturned&) = delete;
  ~WorldErrorsReturned() {
    if (mpi_is_finalized()) return;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, previous_);
    MPI_Errhandler_free(&previous_);
  }

 private:
  MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
};

// The ranks that share this host's memory, found by splitting the world by shared memory.
std::pair<int, int> ranks_sharing_memory(MPI_Comm world) {
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &raw));
  const MpiComm host(raw);
  int rank = 0;
  int size = 0;
  TT_MPI_CHECK(MPI_Comm_rank(host.get(), &rank));
  TT_MPI_CHECK(MPI_Comm_size(host.get(), &size));
  return {rank, size};
}

}  // namespace

struct MpiEnvironment::State {
  State(int* argc, char*** argv) : session(argc, argv) {}

  // Declared first, destroyed last.
  MpiSession session;
  WorldErrorsReturned world_errors;
};

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) : state_(std::make_unique<State>(argc, argv)) {}
MpiEnvironment::~MpiEnvironment() = default;

std::unique_ptr<Bootstrap> MpiEnvironment::world_bootstrap(std::chrono::milliseconds timeout) const {
  return std::make_unique<MpiBootstrap>(duplicate_comm(MPI_COMM_WORLD), timeout);
}

std::pair<int, int> MpiEnvironment::local_rank_and_size() const {
  const MpiComm world = duplicate_comm(MPI_COMM_WORLD);
  return ranks_sharing_memory(world.get());
}

void MpiEnvironment::leave_unfinalized() { state_->session.leave_unfinalized(); }

std::shared_ptr<Engine> make_mpi_backend(Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                                          std::uint64_t max_message_bytes) {
  auto* mpi = dynamic_cast<MpiBootstrap*>(&bootstrap);
  if (!mpi) throw NotSupported("the MPI transport needs a group whose bootstrap is MPI");
  return std::make_shared<MpiBackend>(mpi->comm(),
                                      MpiBackendOptions{.timeout = timeout, .max_message_bytes = max_message_bytes});
}

}  // namespace tensortree::detail
