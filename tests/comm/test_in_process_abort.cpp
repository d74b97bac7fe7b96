// A rank that fails releases the others wherever they wait: in the world group, and in every group
// split from it (DeviceMesh dimensions, splits of splits), through the abort domain the in-process
// world installs (comm/group_abort_domain.hpp), which holds no group alive.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/group_abort_domain.hpp"
#include "comm/group_state.hpp"
#include "in_process_support.hpp"
#include "runtime/transport_factory.hpp"
#include "tensortree/device_mesh.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/error.hpp"
#include "transport/in_process/in_process_bootstrap.hpp"

using namespace tensortree;
using namespace tensortree::test;
using detail::GroupAbortDomain;
using detail::GroupAccess;
using detail::GroupState;

namespace {

constexpr std::int64_t kElements = 37;

Tensor rank_values(int rank) {
  return make_tensor({kElements}, DType::Float32, [rank](std::int64_t i) { return rank_value(rank, i); });
}

// The message of what `wait` threw; the wait must throw (the rank it waits for has failed).
std::string error_of_wait(const std::function<void()>& wait, const std::string& what) {
  try {
    wait();
  } catch (const std::exception& error) {
    return error.what();
  }
  throw std::runtime_error(what + " completed although the rank it waits for failed");
}

Group split_of(const Group& parent, int color, int key, std::vector<int> world_ranks) {
  GroupState& state = GroupAccess::require(parent);
  return GroupAccess::make(state.split(color, key, std::move(world_ranks), state.requested_options()));
}

// A member's state of a world of one rank, over the in-process bootstrap and transports.
std::shared_ptr<GroupState> lone_member() {
  auto bootstraps = detail::make_in_process_bootstraps(1, std::chrono::seconds(20));
  return std::make_shared<GroupState>(std::move(bootstraps.front()),
                                      std::make_shared<detail::DefaultTransportFactory>(), std::vector<int>{0},
                                      quick_options());
}

}  // namespace

TEST_CASE("a rank that fails ends at once the waits of groups split from the in-process world: mesh dimensions, "
          "splits and splits of a dimension") {
  PerRank<std::string> errors(4);
  const auto start = std::chrono::steady_clock::now();
  const auto body = [&](const Group& world) {
    const int rank = world.rank();
    // (dp, tp) = (rank / 2, rank % 2): tp groups {0,1} {2,3}, dp groups {0,2} {1,3}.
    const DeviceMesh mesh(world, {{"dp", 2}, {"tp", 2}});
    const bool outer = rank == 0 || rank == 3;
    const Group split = split_of(world, outer ? 0 : 1, rank, outer ? std::vector<int>{0, 3} : std::vector<int>{1, 2});
    const Group& dp = mesh.group("dp");
    const Group dp_again = split_of(dp, 0, dp.rank(), dp.world_ranks());
    // Each other rank waits for rank 3 in a group split from the world; rank 3 fails once they wait.
    if (rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      throw InvalidArgument("rank 3 gives up");
    }
    const Tensor values = rank_values(rank);
    if (rank == 0) errors[0] = error_of_wait([&] { dist::all_reduce(values, split); }, "all_reduce of split {0,3}");
    if (rank == 1) errors[1] = error_of_wait([&] { dist::barrier(dp_again); }, "barrier of the split of dp {1,3}");
    if (rank == 2) errors[2] = error_of_wait([&] { dist::all_reduce(values, mesh.group("tp")); }, "all_reduce of tp {2,3}");
  };
  // The group timeout is what the waits would run out without the abort.
  CHECK_THROWS_WITH(run_ranks(4, body, quick_options(std::chrono::seconds(20))), "rank 3 gives up");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    CHECK(errors[rank].find("rank 3 of the in-process world failed") != std::string::npos);
  }
}

TEST_CASE("an abort domain aborts its groups and those split from them, a group joining after the abort at once, "
          "and forgets the groups dropped") {
  const auto domain = std::make_shared<GroupAbortDomain>();
  const std::shared_ptr<GroupState> world = lone_member();
  world->abort_with(domain);
  const std::shared_ptr<GroupState> split = world->split(0, 0, {0}, quick_options());
  CHECK(domain->remembered() == 2);
  for (int i = 0; i < 20; ++i) {
    std::shared_ptr<GroupState> dropped = lone_member();
    dropped->abort_with(domain);
    const std::weak_ptr<GroupState> watched = dropped;
    dropped.reset();
    CHECK(watched.expired());  // the domain did not keep it alive
  }
  // The world, the split, and at most the last one dropped.
  CHECK(domain->remembered() <= 3);
  CHECK_FALSE(world->is_aborted());
  CHECK_FALSE(split->is_aborted());

  domain->abort("the world failed");
  CHECK(world->is_aborted());
  CHECK(split->is_aborted());
  const std::shared_ptr<GroupState> late = lone_member();
  CHECK_FALSE(late->is_aborted());
  late->abort_with(domain);
  CHECK(late->is_aborted());
  CHECK_THROWS_AS(late->bootstrap(), BackendError);
  CHECK_THROWS_WITH(GroupAccess::make(late).collectives(Device::cpu()), Catch::Contains("the world failed"));
}
