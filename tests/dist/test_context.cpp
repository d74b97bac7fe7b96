// DistributedContext, groups and meshes: what each rank learns about its place in the job, checked
// against what MPI itself says, and the collective calls that build groups.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "dist_support.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;
using tensortree::test::world_comm;
using tensortree::test::world_rank;
using tensortree::test::world_size;

namespace {

// Every rank's host name, in world-rank order.
std::vector<std::string> host_names() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> all(static_cast<std::size_t>(world_size()) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world_comm());
  std::vector<std::string> names;
  for (int r = 0; r < world_size(); ++r) names.emplace_back(&all[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
  return names;
}

std::vector<int> all_ranks_gathered(int value) {
  std::vector<int> values(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&value, 1, MPI_INT, values.data(), 1, MPI_INT, world_comm());
  return values;
}

// The value of an int tensor element moved through `group` by an all_reduce.
int summed_over(const Group& group, int value) {
  const Tensor tensor = Tensor::full({1}, value, {DType::Int32});
  group.collectives(Device::cpu()).all_reduce(tensor, ReduceOp::Sum)->wait();
  return tensor.data<std::int32_t>()[0];
}

}  // namespace

TEST_CASE("context: the context reports the world rank and size MPI reports", "[mpi][context]") {
  const DistributedContext context;
  CHECK(context.rank() == world_rank());
  CHECK(context.size() == world_size());
  const Group& world = context.world();
  CHECK(world.rank() == world_rank());
  CHECK(world.size() == world_size());
  CHECK(world.is_member());
  std::vector<int> expected(static_cast<std::size_t>(world_size()));
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(world.world_ranks() == expected);
}

TEST_CASE("context: local ranks number the ranks of each host from zero", "[mpi][context]") {
  const DistributedContext context;
  const std::vector<std::string> hosts = host_names();
  const std::vector<int> local_ranks = all_ranks_gathered(context.local_rank());
  const std::vector<int> local_sizes = all_ranks_gathered(context.local_size());
  std::map<std::string, std::vector<int>> by_host;
  for (int r = 0; r < world_size(); ++r) {
    by_host[hosts[static_cast<std::size_t>(r)]].push_back(local_ranks[static_cast<std::size_t>(r)]);
  }
  for (int r = 0; r < world_size(); ++r) {
    INFO("world rank " << r << " on " << hosts[static_cast<std::size_t>(r)]);
    CHECK(local_sizes[static_cast<std::size_t>(r)] ==
          static_cast<int>(by_host[hosts[static_cast<std::size_t>(r)]].size()));
  }
  for (auto& [host, ranks] : by_host) {
    INFO("host " << host);
    std::sort(ranks.begin(), ranks.end());
    std::vector<int> expected(ranks.size());
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(ranks == expected);
  }
}

TEST_CASE("context: the device is the local rank's GPU modulo the device count, or the CPU", "[mpi][context]") {
  const DistributedContext context;
  const int devices = cuda_device_count();
  if (devices == 0) {
    CHECK(context.device() == Device::cpu());
  } else {
    CHECK(context.device() == Device::cuda(context.local_rank() % devices));
  }
}

TEST_CASE("context: a context adopts the MPI the program started and leaves it running", "[mpi][context]") {
  {
    DistributedContext first;
    DistributedContext second;
    CHECK(first.rank() == second.rank());
    CHECK(summed_over(first.world(), first.rank() + 1) == world_size() * (world_size() + 1) / 2);
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  CHECK(finalized == 0);
  const DistributedContext later;
  CHECK(summed_over(later.world(), 2) == 2 * world_size());
}

TEST_CASE("context: new_group ranks members in the order listed and excludes the others", "[mpi][context]") {
  const DistributedContext context;
  const int size = context.size();
  // The last rank first, then every even rank below it.
  std::vector<int> members{size - 1};
  for (int r = 0; r < size - 1; r += 2) members.push_back(r);
  const Group group = context.new_group(members);
  CHECK(group.size() == static_cast<int>(members.size()));
  CHECK(group.world_ranks() == members);
  const auto position = std::find(members.begin(), members.end(), context.rank());
  if (position == members.end()) {
    CHECK_FALSE(group.is_member());
    CHECK(group.rank() == -1);
    CHECK_THROWS_AS(group.collectives(Device::cpu()), InvalidArgument);
    return;
  }
  CHECK(group.rank() == static_cast<int>(position - members.begin()));
  // Traffic stays within the members: their world ranks plus one, summed.
  int expected = 0;
  for (const int member : members) expected += member + 1;
  CHECK(summed_over(group, context.rank() + 1) == expected);
}

TEST_CASE("context: new_group rejects lists that name no rank, repeat one or leave the world", "[mpi][context]") {
  const DistributedContext context;
  CHECK_THROWS_AS(context.new_group({}), InvalidArgument);
  CHECK_THROWS_AS(context.new_group({0, 0}), InvalidArgument);
  CHECK_THROWS_WITH(context.new_group({0, context.size()}), Catch::Contains(std::to_string(context.size())));
  CHECK_THROWS_AS(context.new_group({-1}), InvalidArgument);
}

TEST_CASE("context: new_group fails on every rank when the ranks pass different lists", "[mpi][context]") {
  const DistributedContext context;
  const int size = context.size();
  // The last rank disagrees about the order.
  const std::vector<int> members = context.rank() == size - 1 ? std::vector<int>{1, 0} : std::vector<int>{0, 1};
  CHECK_THROWS_WITH(context.new_group(members), Catch::Contains("different new_group ranks"));
  CHECK(summed_over(context.world(), 1) == size);  // the world is still in step afterwards
}

TEST_CASE("context: an empty Group has no rank, no members and no backend", "[mpi][context]") {
  const Group empty;
  CHECK(empty.rank() == -1);
  CHECK(empty.size() == 0);
  CHECK(empty.world_ranks().empty());
  CHECK_FALSE(empty.is_member());
  CHECK_THROWS_AS(empty.collectives(Device::cpu()), InvalidArgument);
}

TEST_CASE("context: a CUDA backend is NotSupported where no GPU is present", "[mpi][context]") {
  if (cuda_device_count() > 0) return;  // the GPU suites cover CUDA backends
  const DistributedContext context;
  CHECK_THROWS_AS(context.world().collectives(Device::cuda(0)), NotSupported);
}

TEST_CASE("context: a mesh lays ranks out in C order with one group per dimension", "[mpi][context]") {
  const DistributedContext context;
  const int size = context.size();
  std::vector<MeshDim> dims;
  if (size == 4) {
    dims = {{"dp", 2}, {"tp", 2}};
  } else if (size == 2) {
    dims = {{"dp", 2}, {"tp", 1}};
  } else {
    dims = {{"x", size}};
  }
  const DeviceMesh mesh = context.mesh(dims);
  CHECK(mesh.group().size() == size);
  REQUIRE(mesh.coordinates().size() == dims.size());

  // C order: the rank is the coordinates read as a mixed-radix number.
  int linear = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    CHECK(mesh.coordinate(dims[d].name) == mesh.coordinates()[d]);
    linear = linear * dims[d].size + mesh.coordinates()[d];
  }
  CHECK(linear == context.rank());

  int stride = 1;
  for (std::size_t d = dims.size(); d-- > 0;) {
    INFO("dimension " << dims[d].name);
    const Group& line = mesh.group(dims[d].name);
    const int coordinate = mesh.coordinates()[d];
    CHECK(line.size() == dims[d].size);
    CHECK(line.rank() == coordinate);
    std::vector<int> expected;
    for (int i = 0; i < dims[d].size; ++i) expected.push_back(context.rank() + (i - coordinate) * stride);
    CHECK(line.world_ranks() == expected);
    int expected_sum = 0;
    for (const int member : expected) expected_sum += member + 1;
    CHECK(summed_over(line, context.rank() + 1) == expected_sum);
    stride *= dims[d].size;
  }
  CHECK_THROWS_AS(mesh.group("pp"), InvalidArgument);
  CHECK_THROWS_WITH(mesh.coordinate("pp"), Catch::Contains("'pp'"));
}

TEST_CASE("context: a mesh over a sub-group splits only that group's ranks", "[mpi][context]") {
  const DistributedContext context;
  const int size = context.size();
  const std::vector<int> members{size - 1, 0};
  const Group pair = context.new_group(members);
  if (!pair.is_member()) return;
  const DeviceMesh mesh(pair, {{"a", 1}, {"b", 2}});
  CHECK(mesh.coordinate("a") == 0);
  CHECK(mesh.coordinate("b") == pair.rank());
  CHECK(mesh.group("b").world_ranks() == members);
  CHECK(mesh.group("a").world_ranks() == std::vector<int>{context.rank()});
  CHECK(summed_over(mesh.group("b"), context.rank() + 1) == size + 1);
}

TEST_CASE("context: mesh dimensions that do not fit the group are InvalidArgument", "[mpi][context]") {
  const DistributedContext context;
  const int size = context.size();
  CHECK_THROWS_WITH(context.mesh({{"dp", size + 1}}), Catch::Contains("multiply to " + std::to_string(size + 1)));
  CHECK_THROWS_AS(context.mesh({}), InvalidArgument);
  CHECK_THROWS_AS(context.mesh({{"dp", size}, {"dp", 1}}), InvalidArgument);
  CHECK_THROWS_AS(context.mesh({{"", size}}), InvalidArgument);
  CHECK_THROWS_AS(context.mesh({{"dp", 0}}), InvalidArgument);
}
