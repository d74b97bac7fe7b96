// DistributedContext, Group, GroupState and DeviceMesh over MPI communicators.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "core/cuda_api.hpp"
#include "transport/mpi/group_state.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "transport/mpi/mpi_handles.hpp"
#include "tensortree/config.hpp"
#include "tensortree/device_mesh.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/error.hpp"
#include "tensortree/group.hpp"

#if TT_HAVE_NCCL
#include "transport/nccl/nccl_backend.hpp"
#else
#include "transport/staged/staged_backend.hpp"
#endif

namespace tensortree {

namespace detail {

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

int world_rank() {
  int rank = -1;
  TT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

// A duplicate of `comm` whose errors come back as return codes, for TT_MPI_CHECK to report.
MpiComm duplicate(MPI_Comm comm) {
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_dup(comm, &raw));
  MpiComm duplicated(raw);
  TT_MPI_CHECK(MPI_Comm_set_errhandler(duplicated.get(), MPI_ERRORS_RETURN));
  return duplicated;
}

// FNV-1a over the values a collective call's ranks must agree on.
class Fingerprint {
 public:
  Fingerprint& add(std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash_ = (hash_ ^ ((value >> (8 * byte)) & 0xffu)) * 0x100000001b3ull;
    }
    return *this;
  }
  Fingerprint& add(std::string_view text) {
    add(text.size());
    for (const char c : text) add(static_cast<unsigned char>(c));
    return *this;
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

// Collective over `comm`: InvalidArgument on every rank unless every rank passed the same value,
// instead of communicators silently built from different arguments.
void require_agreement(MPI_Comm comm, std::uint64_t fingerprint, const std::string& what) {
  // min(v) == v and min(~v) == ~v (that is, max(v) == v) hold everywhere only if all v are equal.
  std::uint64_t extremes[2] = {fingerprint, ~fingerprint};
  TT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_UINT64_T, MPI_MIN, comm));
  if (extremes[0] != fingerprint || extremes[1] != ~fingerprint) {
    throw InvalidArgument("world rank " + std::to_string(world_rank()) + ": the ranks passed different " + what +
                          " to a collective call (this rank passed " + what + " with fingerprint " +
                          std::to_string(fingerprint) + ")");
  }
}

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

 private:
  bool owns_mpi_ = false;
};

}  // namespace

// ---- GroupState ---------------------------------------------------------------------------------

GroupState::GroupState(MpiComm comm, std::vector<int> world_ranks)
    : comm_(std::move(comm)), world_ranks_(std::move(world_ranks)) {
  TT_MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  TT_MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
  int size = 0;
  TT_MPI_CHECK(MPI_Comm_size(comm_.get(), &size));
  if (size != this->size()) {
    throw BackendError("communicator of " + std::to_string(size) + " ranks for a group of world ranks " +
                       rank_list(world_ranks_));
  }
}

GroupState::GroupState(std::vector<int> world_ranks) : world_ranks_(std::move(world_ranks)) {}

GroupState::~GroupState() = default;

Backend& GroupState::backend(Device device) {
  if (rank_ < 0) {
    throw InvalidArgument("world rank " + std::to_string(world_rank()) +
                          " is not a member of the group of world ranks " + rank_list(world_ranks_));
  }
  const std::lock_guard lock(backends_mutex_);
  if (!mpi_) mpi_ = std::make_unique<MpiBackend>(comm_.get());
  if (device.is_cpu()) return *mpi_;
  return cuda_backend(device);
}

#if TT_HAVE_NCCL
// Creating a NCCL communicator is collective over the group: group rank 0 makes the unique id and
// MPI carries it to the others.
Backend& GroupState::cuda_backend(Device device) {
  const int index = resolve_device(device).index();
  std::unique_ptr<Backend>& nccl = nccl_by_device_[index];
  if (!nccl) {
    const MPI_Comm comm = comm_.get();
    nccl = make_nccl_backend(rank_, size(), index, [comm](std::span<std::byte> unique_id) {
      TT_MPI_CHECK(MPI_Bcast(unique_id.data(), static_cast<int>(unique_id.size()), MPI_BYTE, 0, comm));
    });
  }
  return *nccl;
}
#else
Backend& GroupState::cuda_backend(Device device) {
  resolve_device(device);  // NotSupported where no CUDA device can hold the tensors
  if (!staged_) staged_ = std::make_unique<StagedBackend>(*mpi_);
  return *staged_;
}
#endif

}  // namespace detail

// ---- Group ------------------------------------------------------------------------------------------

Group::Group(std::shared_ptr<detail::GroupState> state) : state_(std::move(state)) {}

int Group::rank() const { return state_ ? state_->rank() : -1; }

int Group::size() const { return state_ ? state_->size() : 0; }

const std::vector<int>& Group::world_ranks() const {
  static const std::vector<int> no_ranks;
  return state_ ? state_->world_ranks() : no_ranks;
}

Backend& Group::backend(Device device) const {
  if (!state_) throw InvalidArgument("an empty Group has no backend (get groups from a DistributedContext)");
  return state_->backend(device);
}

// ---- DeviceMesh ---------------------------------------------------------------------------------------

namespace {

void validate_mesh(const Group& parent, const std::vector<MeshDim>& dims) {
  if (!parent.is_member()) throw InvalidArgument("a DeviceMesh is built by members of its group only");
  if (dims.empty()) throw InvalidArgument("a DeviceMesh needs at least one dimension");
  std::int64_t product = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].name.empty()) throw InvalidArgument("mesh dimension " + std::to_string(i) + " has no name");
    if (dims[i].size < 1) {
      throw InvalidArgument("mesh dimension '" + dims[i].name + "' has size " + std::to_string(dims[i].size));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (dims[j].name == dims[i].name) throw InvalidArgument("mesh dimension '" + dims[i].name + "' appears twice");
    }
    product *= dims[i].size;
  }
  if (product != parent.size()) {
    throw InvalidArgument("mesh dimensions multiply to " + std::to_string(product) + " but the group has " +
                          std::to_string(parent.size()) + " ranks");
  }
}

std::uint64_t mesh_fingerprint(const std::vector<MeshDim>& dims) {
  detail::Fingerprint fingerprint;
  for (const MeshDim& dim : dims) fingerprint.add(dim.name).add(static_cast<std::uint64_t>(dim.size));
  return fingerprint.value();
}

// C order: the last dimension varies fastest.
std::vector<int> coordinates_of(int rank, const std::vector<MeshDim>& dims) {
  std::vector<int> coordinates(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    coordinates[d] = rank % dims[d].size;
    rank /= dims[d].size;
  }
  return coordinates;
}

int linear_index(const std::vector<int>& coordinates, const std::vector<MeshDim>& dims) {
  int index = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) index = index * dims[d].size + coordinates[d];
  return index;
}

// The ranks that share every coordinate but dimension `d`'s, ranked by that coordinate.
Group dimension_group(const Group& parent, const std::vector<MeshDim>& dims, const std::vector<int>& coordinates,
                      std::size_t d) {
  std::vector<int> line = coordinates;
  line[d] = 0;
  const int color = linear_index(line, dims);
  std::vector<int> world_ranks(static_cast<std::size_t>(dims[d].size));
  for (int i = 0; i < dims[d].size; ++i) {
    line[d] = i;
    world_ranks[static_cast<std::size_t>(i)] = parent.world_ranks()[static_cast<std::size_t>(linear_index(line, dims))];
  }
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_split(parent.state()->comm(), color, coordinates[d], &raw));
  return Group(std::make_shared<detail::GroupState>(detail::MpiComm(raw), std::move(world_ranks)));
}

}  // namespace

DeviceMesh::DeviceMesh(const Group& parent, std::vector<MeshDim> dims) : parent_(parent), dims_(std::move(dims)) {
  validate_mesh(parent_, dims_);
  detail::require_agreement(parent_.state()->comm(), mesh_fingerprint(dims_), "mesh dimensions");
  coordinates_ = coordinates_of(parent_.rank(), dims_);
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    dim_groups_.push_back(dimension_group(parent_, dims_, coordinates_, d));
  }
}

const Group& DeviceMesh::group(std::string_view dim) const { return dim_groups_[dim_index(dim)]; }

int DeviceMesh::coordinate(std::string_view dim) const { return coordinates_[dim_index(dim)]; }

std::size_t DeviceMesh::dim_index(std::string_view dim) const {
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    if (dims_[d].name == dim) return d;
  }
  std::string names;
  for (const MeshDim& each : dims_) names += (names.empty() ? "" : ", ") + each.name;
  throw InvalidArgument("the mesh has no dimension '" + std::string(dim) + "' (it has " + names + ")");
}

// ---- DistributedContext ----------------------------------------------------------------------------------

struct DistributedContext::State {
  State(int* argc, char*** argv) : session(argc, argv) {}

  // Declared first, destroyed last: MPI outlives every communicator below.
  detail::MpiSession session;
  // The context's own collectives (group creation), kept apart from the users' traffic on world.
  detail::MpiComm control;
  Group world;
  int local_rank = 0;
  int local_size = 1;
  Device device;
};

namespace {

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

void validate_new_group(const std::vector<int>& world_ranks, int world_size) {
  if (world_ranks.empty()) throw InvalidArgument("new_group needs at least one rank");
  std::vector<int> sorted = world_ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || sorted.back() >= world_size) {
    throw InvalidArgument("new_group ranks " + detail::rank_list(world_ranks) + " must lie in 0.." +
                          std::to_string(world_size - 1));
  }
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw InvalidArgument("new_group ranks " + detail::rank_list(world_ranks) + " repeat a rank");
  }
}

}  // namespace

DistributedContext::DistributedContext(int* argc, char*** argv) : state_(std::make_unique<State>(argc, argv)) {
  state_->control = detail::duplicate(MPI_COMM_WORLD);
  detail::MpiComm world = detail::duplicate(MPI_COMM_WORLD);
  int size = 0;
  TT_MPI_CHECK(MPI_Comm_size(world.get(), &size));
  std::vector<int> world_ranks(static_cast<std::size_t>(size));
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  state_->world = Group(std::make_shared<detail::GroupState>(std::move(world), std::move(world_ranks)));
  std::tie(state_->local_rank, state_->local_size) = local_rank_and_size(state_->control.get());
  const int devices = cuda_device_count();
  state_->device = devices > 0 ? Device::cuda(state_->local_rank % devices) : Device::cpu();
  if (devices > 0) cuda::set_device(state_->device.index());  // later allocations land on it
}

DistributedContext::~DistributedContext() = default;

int DistributedContext::rank() const { return state_->world.rank(); }
int DistributedContext::size() const { return state_->world.size(); }
int DistributedContext::local_rank() const { return state_->local_rank; }
int DistributedContext::local_size() const { return state_->local_size; }
Device DistributedContext::device() const { return state_->device; }
const Group& DistributedContext::world() const { return state_->world; }

Group DistributedContext::new_group(std::vector<int> world_ranks) const {
  validate_new_group(world_ranks, size());
  detail::Fingerprint fingerprint;
  for (const int rank : world_ranks) fingerprint.add(static_cast<std::uint64_t>(rank));
  detail::require_agreement(state_->control.get(), fingerprint.value(), "new_group ranks");
  const auto position = std::find(world_ranks.begin(), world_ranks.end(), rank());
  const bool member = position != world_ranks.end();
  MPI_Comm raw = MPI_COMM_NULL;
  // Keyed by position in the list, so that group ranks follow the caller's order.
  TT_MPI_CHECK(MPI_Comm_split(state_->control.get(), member ? 0 : MPI_UNDEFINED,
                              static_cast<int>(position - world_ranks.begin()), &raw));
  if (!member) return Group(std::make_shared<detail::GroupState>(std::move(world_ranks)));
  return Group(std::make_shared<detail::GroupState>(detail::MpiComm(raw), std::move(world_ranks)));
}

DeviceMesh DistributedContext::mesh(std::vector<MeshDim> dims) const { return DeviceMesh(world(), std::move(dims)); }

}  // namespace tensortree
