// transport/mpi in a library built without MPI: each entry point throws NotSupported, so that a
// program links everywhere and learns at run time what this build lacks (a DistributedContext
// cannot be made; Group and DeviceMesh, backend-neutral, have no members without one).
#include <memory>
#include <utility>

#include "transport/mpi/mpi_environment.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

[[noreturn]] void built_without_mpi() { throw NotSupported("tensortree was built without MPI"); }

}  // namespace

struct MpiEnvironment::State {};

MpiEnvironment::MpiEnvironment(int*, char***) { built_without_mpi(); }
MpiEnvironment::~MpiEnvironment() = default;
std::unique_ptr<Bootstrap> MpiEnvironment::world_bootstrap(std::chrono::milliseconds) const { built_without_mpi(); }
std::pair<int, int> MpiEnvironment::local_rank_and_size() const { built_without_mpi(); }
void MpiEnvironment::leave_unfinalized() {}

std::shared_ptr<Engine> make_mpi_backend(Bootstrap&, std::chrono::milliseconds, std::uint64_t) {
  built_without_mpi();
}

}  // namespace tensortree::detail
