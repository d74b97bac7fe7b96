// DistributedContext: starts (or adopts) MPI, finds the local rank, binds the GPU, and makes
// groups whose bootstrap is an MPI communicator and whose transports come from the transport
// factory (runtime/transport_factory.hpp).
#include "tensortree/dist_context.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "comm/abandoned_operations.hpp"
#include "comm/agreement.hpp"
#include "comm/group_state.hpp"
#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "runtime/transport_factory.hpp"
#include "transport/mpi/mpi_environment.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

void validate_new_group(const std::vector<int>& world_ranks, int world_size) {
  if (world_ranks.empty()) throw InvalidArgument("new_group needs at least one rank");
  std::vector<int> sorted = world_ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || sorted.back() >= world_size) {
    throw InvalidArgument(fmt::format("new_group ranks {} must lie in 0..{}", world_ranks, world_size - 1));
  }
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw InvalidArgument(fmt::format("new_group ranks {} repeat a rank", world_ranks));
  }
}

// Destroyed after every group of the context and before MPI is finalised: MPI must not be finalised
// under a transfer still in flight (a closing a transport sends its peers as its group goes, a
// receive it keeps posted for theirs), which would keep its communicator alive for good. Those
// complete within moments of their peers' teardown; what does not complete by `kSettleLimit` (a
// receive from a peer that never sends, an operation of an aborted sub-group) never will, and is
// left (a bounded leak) rather than holding the exit for the group's whole timeout.
class SettledBeforeFinalize {
 public:
  static constexpr std::chrono::milliseconds kSettleLimit{2000};

  explicit SettledBeforeFinalize(std::chrono::milliseconds timeout) : limit_(std::min(timeout, kSettleLimit)) {}
  SettledBeforeFinalize(const SettledBeforeFinalize&) = delete;
  SettledBeforeFinalize& operator=(const SettledBeforeFinalize&) = delete;
  ~SettledBeforeFinalize() {
    if (!skipped_) detail::settle_abandoned_operations(limit_);
  }

  // After an abort nothing in flight completes: MPI is left unfinalised instead.
  void skip() { skipped_ = true; }

 private:
  std::chrono::milliseconds limit_;
  bool skipped_ = false;
};

}  // namespace

struct DistributedContext::State {
  // `options` resolved before MPI starts: a bad TENSORTREE_* value is InvalidArgument from the
  // constructor, with nothing to undo.
  State(int* argc, char*** argv, ResolvedGroupOptions options) : options(options), mpi(argc, argv) {}

  ResolvedGroupOptions options;

  // Declared first, destroyed last: MPI outlives every communicator below.
  detail::MpiEnvironment mpi;
  SettledBeforeFinalize settled{options.timeout};
  // The context's own rounds (group creation), kept apart from the users' traffic on world.
  std::unique_ptr<detail::Bootstrap> control;
  std::shared_ptr<detail::TransportFactory> transports = std::make_shared<detail::DefaultTransportFactory>();
  Group world;
  int local_rank = 0;
  int local_size = 1;
  Device device;
};

DistributedContext::DistributedContext(int* argc, char*** argv, GroupOptions options)
    : state_(std::make_unique<State>(argc, argv, options.resolve())) {
  state_->control = state_->mpi.world_bootstrap(state_->options.timeout);
  std::tie(state_->local_rank, state_->local_size) = state_->mpi.local_rank_and_size();
  const int devices = cuda_device_count();
  state_->device = devices > 0 ? Device::cuda(state_->local_rank % devices) : Device::cpu();
  // Before any group is made: later allocations land on it, and groups record it as this rank's GPU.
  if (devices > 0) cuda::set_device(state_->device.index());
  std::unique_ptr<detail::Bootstrap> world = state_->mpi.world_bootstrap(state_->options.timeout);
  std::vector<int> world_ranks(static_cast<std::size_t>(world->size()));
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  state_->world = detail::GroupAccess::make(
      std::make_shared<detail::GroupState>(std::move(world), state_->transports, std::move(world_ranks), options));
}

DistributedContext::DistributedContext(GroupOptions options) : DistributedContext(nullptr, nullptr, options) {}

DistributedContext::~DistributedContext() {
  if (!state_->world.is_aborted()) return;
  state_->mpi.leave_unfinalized();
  state_->settled.skip();
}

int DistributedContext::rank() const { return state_->world.rank(); }
int DistributedContext::size() const { return state_->world.size(); }
int DistributedContext::local_rank() const { return state_->local_rank; }
int DistributedContext::local_size() const { return state_->local_size; }
Device DistributedContext::device() const { return state_->device; }
const Group& DistributedContext::world() const { return state_->world; }

Group DistributedContext::new_group(std::vector<int> world_ranks) const {
  return new_group(std::move(world_ranks), detail::GroupAccess::require(world()).requested_options());
}

Group DistributedContext::new_group(std::vector<int> world_ranks, GroupOptions options) const {
  validate_new_group(world_ranks, size());
  options.resolve();  // throws before any collective step, on every rank alike
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
