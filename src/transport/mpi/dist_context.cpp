// DistributedContext over MPI: starts (or adopts) MPI, finds the local rank, binds the GPU, and
// makes groups whose bootstrap is an MPI communicator and whose transports come from the MPI
// transport factory.
#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "comm/agreement.hpp"
#include "comm/group_state.hpp"
#include "core/cuda_api.hpp"
#include "transport/mpi/mpi_bootstrap.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "transport/mpi/mpi_handles.hpp"
#include "transport/mpi/mpi_transports.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

// Owns MPI's lifetime when the context started it; otherwise adopts the program's MPI.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) {
    int initialized = 0;
    TT_MPI_CHECK(MPI_Initialized(&initialized));
    if (detail::mpi_is_finalized()) throw BackendError("MPI has already been finalised; it cannot be started again");
    if (initialized) return;
    int provided = MPI_THREAD_SINGLE;
    // MPI grants the highest level it has at or below MULTIPLE (SERIALIZED at least, in practice).
    TT_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    owns_mpi_ = true;
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() {
    if (owns_mpi_ && !detail::mpi_is_finalized()) MPI_Finalize();
  }

  // Over TCP, Open MPI 4.1's MPI_Finalize can wait forever for traffic to a rank that died (seen
  // in one of several runs of tests/dist/peer_death); a process whose world was aborted ends
  // without it, which the launcher's recovery mode accepts.
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
    if (detail::mpi_is_finalized()) return;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, previous_);
    MPI_Errhandler_free(&previous_);
  }

 private:
  MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
};

// The ranks that share this host's memory, found by splitting the world by shared memory.
std::pair<int, int> local_rank_and_size(MPI_Comm world) {
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &raw));
  const detail::MpiComm host(raw);
  int rank = 0;
  int size = 0;
  TT_MPI_CHECK(MPI_Comm_rank(host.get(), &rank));
  TT_MPI_CHECK(MPI_Comm_size(host.get(), &size));
  return {rank, size};
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

void validate_new_group(const std::vector<int>& world_ranks, int world_size) {
  if (world_ranks.empty()) throw InvalidArgument("new_group needs at least one rank");
  std::vector<int> sorted = world_ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || sorted.back() >= world_size) {
    throw InvalidArgument("new_group ranks " + rank_list(world_ranks) + " must lie in 0.." +
                          std::to_string(world_size - 1));
  }
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw InvalidArgument("new_group ranks " + rank_list(world_ranks) + " repeat a rank");
  }
}

}  // namespace

struct DistributedContext::State {
  State(int* argc, char*** argv) : session(argc, argv) {}

  // Declared first, destroyed last: MPI outlives every communicator below.
  MpiSession session;
  WorldErrorsReturned world_errors;
  // The context's own rounds (group creation), kept apart from the users' traffic on world.
  std::unique_ptr<detail::MpiBootstrap> control;
  std::shared_ptr<detail::TransportFactory> transports = std::make_shared<detail::MpiTransportFactory>();
  Group world;
  int local_rank = 0;
  int local_size = 1;
  Device device;
};

DistributedContext::DistributedContext(int* argc, char*** argv, GroupOptions options)
    : state_(std::make_unique<State>(argc, argv)) {
  detail::validate_options(options);
  state_->control = std::make_unique<detail::MpiBootstrap>(detail::duplicate_comm(MPI_COMM_WORLD), options.timeout);
  std::tie(state_->local_rank, state_->local_size) = local_rank_and_size(state_->control->comm());
  const int devices = cuda_device_count();
  state_->device = devices > 0 ? Device::cuda(state_->local_rank % devices) : Device::cpu();
  // Before any group is made: later allocations land on it, and groups record it as this rank's GPU.
  if (devices > 0) cuda::set_device(state_->device.index());
  auto world = std::make_unique<detail::MpiBootstrap>(detail::duplicate_comm(MPI_COMM_WORLD), options.timeout);
  std::vector<int> world_ranks(static_cast<std::size_t>(world->size()));
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  state_->world = detail::GroupAccess::make(
      std::make_shared<detail::GroupState>(std::move(world), state_->transports, std::move(world_ranks), options));
}

DistributedContext::DistributedContext(GroupOptions options) : DistributedContext(nullptr, nullptr, options) {}

DistributedContext::~DistributedContext() {
  if (state_->world.is_aborted()) state_->session.leave_unfinalized();
}

int DistributedContext::rank() const { return state_->world.rank(); }
int DistributedContext::size() const { return state_->world.size(); }
int DistributedContext::local_rank() const { return state_->local_rank; }
int DistributedContext::local_size() const { return state_->local_size; }
Device DistributedContext::device() const { return state_->device; }
const Group& DistributedContext::world() const { return state_->world; }

Group DistributedContext::new_group(std::vector<int> world_ranks) const {
  return new_group(std::move(world_ranks), world().options());
}

Group DistributedContext::new_group(std::vector<int> world_ranks, GroupOptions options) const {
  validate_new_group(world_ranks, size());
  detail::validate_options(options);  // before any collective step, on every rank alike
  detail::Fingerprint fingerprint;
  for (const int rank : world_ranks) fingerprint.add(static_cast<std::uint64_t>(rank));
  detail::require_agreement(*state_->control, fingerprint.value(), "new_group ranks");
  const auto position = std::find(world_ranks.begin(), world_ranks.end(), rank());
  const bool member = position != world_ranks.end();
  // Keyed by position in the list, so that group ranks follow the caller's order.
  std::unique_ptr<detail::Bootstrap> sub =
      state_->control->split(member ? 0 : -1, static_cast<int>(position - world_ranks.begin()));
  if (!sub) return detail::GroupAccess::make(std::make_shared<detail::GroupState>(std::move(world_ranks), options));
  return detail::GroupAccess::make(
      std::make_shared<detail::GroupState>(std::move(sub), state_->transports, std::move(world_ranks), options));
}

DeviceMesh DistributedContext::mesh(std::vector<MeshDim> dims) const { return DeviceMesh(world(), std::move(dims)); }

}  // namespace tensortree
