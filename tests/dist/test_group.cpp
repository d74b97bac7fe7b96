// Group as a backend-neutral communicator: options given to the world and to sub-groups, the
// group timeout bounding blocking waits (a receive nobody answers throws Timeout, and the group
// goes on working), per-group attachments, the per-peer transport table, and the agreement round.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "comm/agreement.hpp"
#include "comm/group_state.hpp"
#include "dist_support.hpp"
#include "scoped_env.hpp"
#include "tensortree/device_mesh.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;
using namespace std::chrono_literals;
using tensortree::test::right_neighbour;
using tensortree::test::ScopedEnv;
using tensortree::test::world_rank;
using tensortree::test::world_size;

namespace {

// Every member's rank_value(world rank, i) for i < 3, gathered over `group`, checked element by
// element against the members' world ranks.
void check_gathered(const Group& group) {
  const Tensor mine = Tensor::empty({3}, {DType::Float64});
  for (std::int64_t i = 0; i < 3; ++i) mine.data<double>()[i] = test::rank_value(world_rank(), i);
  const std::vector<Tensor> all = dist::all_gather(mine, group);
  REQUIRE(all.size() == static_cast<std::size_t>(group.size()));
  for (int r = 0; r < group.size(); ++r) {
    const int world = group.world_ranks()[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < 3; ++i) CHECK(all[static_cast<std::size_t>(r)].data<double>()[i] == test::rank_value(world, i));
  }
}

struct Counter {
  int value = 0;
};

}  // namespace

namespace {

// Runs `wait`, which must throw Timeout no sooner than `limit` (and long before 20 s: a hang guard,
// not a timing); returns the error's message.
template <class Wait>
std::string timeout_of(Wait&& wait, std::chrono::milliseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  std::string message = "no Timeout";
  try {
    wait();
  } catch (const Timeout& error) {
    message = error.what();
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= limit);
  CHECK(waited < std::chrono::seconds(20));
  return message;
}

}  // namespace

TEST_CASE("group: the world takes the context's options, new_group its own or the world's", "[mpi][group]") {
  const DistributedContext context(GroupOptions{.timeout = 4321ms});
  CHECK(context.world().options().timeout == 4321ms);
  const int size = context.size();
  std::vector<int> reversed;
  for (int r = size - 1; r >= 0; --r) reversed.push_back(r);
  const Group inherited = context.new_group(reversed);
  CHECK(inherited.options().timeout == 4321ms);
  const Group own = context.new_group(reversed, GroupOptions{.timeout = 777ms});
  CHECK(own.options().timeout == 777ms);
  CHECK(own.rank() == size - 1 - world_rank());
  check_gathered(own);
  CHECK(Group().options().timeout == ResolvedGroupOptions().timeout);
}

TEST_CASE("group: sub-groups of the first ranks carry their options; the others are not members", "[mpi][group]") {
  const DistributedContext context;
  const int size = context.size();
  const std::vector<int> firsts = size > 2 ? std::vector<int>{0, 1} : std::vector<int>{0};
  const Group group = context.new_group(firsts, GroupOptions{.timeout = 2500ms});
  const bool member = world_rank() < static_cast<int>(firsts.size());
  CHECK(group.is_member() == member);
  CHECK(group.options().timeout == 2500ms);
  CHECK(group.world_ranks() == firsts);
  if (member) {
    check_gathered(group);
  } else {
    CHECK_THROWS_AS(group.transport(0, Device::cpu()), InvalidArgument);
  }
}

TEST_CASE("group: mesh dimension groups inherit the parent's options", "[mpi][group]") {
  const DistributedContext context(GroupOptions{.timeout = 1234ms});
  const DeviceMesh mesh = context.mesh({{"all", context.size()}, {"one", 1}});
  CHECK(mesh.group("all").options().timeout == 1234ms);
  CHECK(mesh.group("one").options().timeout == 1234ms);
  CHECK(mesh.group("one").size() == 1);
  check_gathered(mesh.group("all"));
}

TEST_CASE("group: a timeout that is not positive is InvalidArgument before any collective step", "[mpi][group]") {
  const DistributedContext context;
  CHECK_THROWS_AS(context.new_group({0}, GroupOptions{.timeout = 0ms}), InvalidArgument);
  CHECK_THROWS_AS(context.new_group({0}, GroupOptions{.timeout = -5ms}), InvalidArgument);
  CHECK_THROWS_AS(DistributedContext(GroupOptions{.timeout = 0ms}), InvalidArgument);
}

TEST_CASE("group: options set only the fields they name; TENSORTREE_* variables set the others", "[mpi][group]") {
  const ScopedEnv timeout("TENSORTREE_TIMEOUT_MS", "2500");
  const ScopedEnv transport("TENSORTREE_CUDA_TRANSPORT", "staged");
  const DistributedContext context(GroupOptions{.max_message_bytes = 4096});
  CHECK(context.world().options().timeout == 2500ms);
  CHECK(context.world().options().cuda_transport == CudaTransport::Staged);
  CHECK(context.world().options().max_message_bytes == 4096);
  // An explicit field wins over its variable.
  const Group own = context.new_group({0}, GroupOptions{.timeout = 777ms, .cuda_transport = CudaTransport::Nccl});
  CHECK(own.options().timeout == 777ms);
  CHECK(own.options().cuda_transport == CudaTransport::Nccl);
  CHECK(own.options().max_message_bytes == Group().options().max_message_bytes);
  CHECK(context.new_group({0}).options().max_message_bytes == 4096);
}

TEST_CASE("group: a bad TENSORTREE_* value is InvalidArgument from the context and new_group, naming it",
          "[mpi][group]") {
  const DistributedContext context;
  for (const auto& [name, value] : {std::pair{"TENSORTREE_TIMEOUT_MS", "soon"}, {"TENSORTREE_TIMEOUT_MS", "0"},
                                    {"TENSORTREE_CUDA_TRANSPORT", "gloo"}, {"TENSORTREE_HOST_TRANSPORT", "tcp"},
                                    {"TENSORTREE_DISTRIBUTED_DEBUG", "DETIAL"}}) {
    INFO(name << "=" << value);
    const ScopedEnv bad(name, value);
    CHECK_THROWS_WITH(DistributedContext(), Catch::Contains(name) && Catch::Contains(value));
    CHECK_THROWS_AS(DistributedContext(), InvalidArgument);
    CHECK_THROWS_WITH(context.new_group({0}), Catch::Contains(name) && Catch::Contains(value));
  }
  // A field set explicitly does not read its variable.
  const ScopedEnv bad("TENSORTREE_TIMEOUT_MS", "soon");
  CHECK(context.new_group({0}, GroupOptions{.timeout = 900ms}).options().timeout == 900ms);
}

TEST_CASE("group: every member holds every member's placement, the same on all ranks", "[mpi][group]") {
  const Group& world = test::context().world();
  const auto& placements = detail::GroupAccess::require(world).placements();
  REQUIRE(placements.size() == static_cast<std::size_t>(world.size()));
  const detail::RankPlacement mine = detail::this_placement();
  CHECK(placements[static_cast<std::size_t>(world.rank())] == mine);
  // The tests run on one host: one node everywhere, and a GPU exactly where CUDA sees one.
  for (const detail::RankPlacement& placement : placements) {
    CHECK(placement.node == mine.node);
    CHECK(placement.has_gpu == (cuda_device_count() > 0));
  }
}

TEST_CASE("group: a recv nobody sends to throws Timeout within the group's limit, naming recv, the peer and the "
          "limit, and the group keeps working",
          "[mpi][group][timeout]") {
  if (world_size() < 2) return;
  const DistributedContext context(GroupOptions{.timeout = 1000ms});
  const Group& world = context.world();
  const int peer = right_neighbour(world_rank());
  const Tensor into = Tensor::full({4}, -1.0, {DType::Float64});
  WorkPtr work;
  const std::string message = timeout_of(
      [&] {
        work = dist::irecv(into, peer, world, {.tag = 91});
        work->wait();
      },
      1000ms);
  CHECK(message.find("recv") != std::string::npos);
  CHECK(message.find("rank " + std::to_string(peer)) != std::string::npos);
  CHECK(message.find("1000 ms") != std::string::npos);
  // Still posted: a second wait times out again; dropping the Work cancels the receive.
  CHECK_THROWS_AS(work->wait(), Timeout);
  CHECK_FALSE(work->is_completed());
  work.reset();
  for (std::int64_t i = 0; i < 4; ++i) CHECK(into.data<double>()[i] == -1.0);
  test::barrier();
  check_gathered(world);
}

TEST_CASE("group: a recv that timed out completes on a later wait once its message arrives", "[mpi][group][timeout]") {
  if (world_size() < 2) return;
  const DistributedContext context(GroupOptions{.timeout = 300ms});
  const Group& world = context.world();
  const int rank = world_rank();
  const int from = test::left_neighbour(rank);
  const Tensor in = Tensor::full({3}, 0.0, {DType::Float64});
  WorkPtr received = dist::irecv(in, from, world, {.tag = 94});
  CHECK_THROWS_AS(received->wait(), Timeout);
  test::barrier();
  const Tensor out = Tensor::empty({3}, {DType::Float64});
  for (std::int64_t i = 0; i < 3; ++i) out.data<double>()[i] = test::rank_value(rank, i);
  WorkPtr sent = dist::isend(out, right_neighbour(rank), world, {.tag = 94});
  received->wait();
  sent->wait();
  for (std::int64_t i = 0; i < 3; ++i) CHECK(in.data<double>()[i] == test::rank_value(from, i));
}

TEST_CASE("group: recv_message from a peer that sends nothing throws Timeout within the limit", "[mpi][group][timeout]") {
  if (world_size() < 2) return;
  const DistributedContext context(GroupOptions{.timeout = 500ms});
  const Group& world = context.world();
  const int peer = right_neighbour(world_rank());
  const std::string message = timeout_of([&] { world.transport(peer, Device::cpu()).recv_message(peer, 92); }, 500ms);
  CHECK(message.find("recv_message with rank " + std::to_string(peer)) != std::string::npos);
  CHECK(message.find("500 ms") != std::string::npos);
  test::barrier();
  check_gathered(world);
}

TEST_CASE("group: a message that arrives within the limit is received, not timed out", "[mpi][group][timeout]") {
  if (world_size() < 2) return;
  const DistributedContext context(GroupOptions{.timeout = 20000ms});
  const Group& world = context.world();
  const int rank = world_rank();
  const Tensor out = Tensor::full({2}, test::rank_value(rank, 0), {DType::Float64});
  const Tensor in = Tensor::full({2}, 0.0, {DType::Float64});
  const int from = test::left_neighbour(rank);
  WorkPtr received = dist::irecv(in, from, world, {.tag = 93});
  dist::send(out, right_neighbour(rank), world, {.tag = 93});
  received->wait();
  for (std::int64_t i = 0; i < 2; ++i) CHECK(in.data<double>()[i] == test::rank_value(from, 0));
}

TEST_CASE("group: attachments are one object per group, shared by its copies, distinct between groups",
          "[mpi][group]") {
  const DistributedContext context;
  const Group& world = context.world();
  const Group copy = world;
  const Group other = context.new_group([&] {
    std::vector<int> all;
    for (int r = 0; r < context.size(); ++r) all.push_back(r);
    return all;
  }());
  detail::GroupState& world_state = detail::GroupAccess::require(world);
  detail::GroupState& other_state = detail::GroupAccess::require(other);
  world_state.attachment<Counter>().value = 10 + world_rank();
  CHECK(detail::GroupAccess::require(copy).attachment<Counter>().value == 10 + world_rank());
  CHECK(&detail::GroupAccess::require(copy).attachment<Counter>() == &world_state.attachment<Counter>());
  CHECK(other_state.attachment<Counter>().value == 0);
  CHECK(&other_state.attachment<Counter>() != &world_state.attachment<Counter>());
  other_state.attachment<Counter>().value = 7;
  CHECK(world_state.attachment<Counter>().value == 10 + world_rank());
}

TEST_CASE("group: with HostTransport::Mpi the transport table serves every peer of a CPU group with MPI, the "
          "collectives' engine",
          "[mpi][group]") {
  const DistributedContext context;
  std::vector<int> everyone(static_cast<std::size_t>(context.size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  const Group world = context.new_group(everyone, {.host_transport = HostTransport::Mpi});
  CHECK(world.collectives(Device::cpu()).name() == "mpi");
  PeerTransport& any_source = world.any_source_transport(Device::cpu());
  CHECK(any_source.name() == "mpi");
  for (int peer = 0; peer < world.size(); ++peer) {
    PeerTransport& transport = world.transport(peer, Device::cpu());
    CHECK(transport.name() == "mpi");
    CHECK(&transport == &any_source);
    CHECK(transport.capabilities().host_memory);
  }
  CHECK_THROWS_AS(world.transport(-1, Device::cpu()), InvalidArgument);
  CHECK_THROWS_AS(world.transport(world.size(), Device::cpu()), InvalidArgument);
  CHECK_THROWS_AS(Group().transport(0, Device::cpu()), InvalidArgument);
  if (context.device().is_cpu()) {
    CHECK_THROWS_AS(world.transport(0, Device::cuda(0)), NotSupported);
  } else {
    for (int peer = 0; peer < world.size(); ++peer) {
      CHECK(world.transport(peer, context.device()).capabilities().cuda_memory);
    }
  }
}

TEST_CASE("group: with HostTransport::SharedMemory the other ranks of this node are served by shared memory, the "
          "own rank by MPI",
          "[mpi][group]") {
  const DistributedContext context;
  std::vector<int> everyone(static_cast<std::size_t>(context.size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  // Every rank of the test runs on this machine, as the same user: their memory maps both ways.
  const Group group = context.new_group(everyone, {.host_transport = HostTransport::SharedMemory});
  for (int peer = 0; peer < group.size(); ++peer) {
    CHECK(std::string(group.transport(peer, Device::cpu()).name()) ==
          (peer == group.rank() ? "mpi" : "shared memory (memfd)"));
  }
  // The collectives are MPI's; the shared-memory transport takes receives from any source, telling
  // frames from plain messages.
  CHECK(std::string(group.collectives(Device::cpu()).name()) == "mpi");
  if (group.size() > 1) CHECK(std::string(group.any_source_transport(Device::cpu()).name()) == "shared memory (memfd)");
}

TEST_CASE("group: the agreement round passes equal values and names the ranks that differ", "[mpi][group]") {
  const DistributedContext context;
  const Group& world = context.world();
  CHECK_NOTHROW(detail::require_agreement(world, 0xfeedu, "test values"));
  if (world.size() < 2) return;
  // Each rank its own value: every other rank differs, listed in rank order.
  const auto differs = detail::disagreement(world, static_cast<std::uint64_t>(world.rank() + 100), "test values");
  REQUIRE(differs.has_value());
  std::string others;
  for (int r = 0; r < world.size(); ++r) {
    if (r != world.rank()) others += (others.empty() ? "" : ", ") + std::to_string(r);
  }
  CHECK(differs->find("different test values") != std::string::npos);
  CHECK(differs->find("ranks [" + others + "]") != std::string::npos);
  CHECK(differs->find("fingerprint " + std::to_string(world.rank() + 100)) != std::string::npos);
  // Only the last rank differs: the others name it alone, it names all of them.
  const bool last = world.rank() == world.size() - 1;
  std::string message;
  try {
    detail::require_agreement(world, last ? 2u : 1u, "test values");
  } catch (const InvalidArgument& error) {
    message = error.what();
  }
  std::string expected = last ? "" : std::to_string(world.size() - 1);
  if (last) {
    for (int r = 0; r + 1 < world.size(); ++r) expected += (expected.empty() ? "" : ", ") + std::to_string(r);
  }
  CHECK(message.find("ranks [" + expected + "]") != std::string::npos);
}
