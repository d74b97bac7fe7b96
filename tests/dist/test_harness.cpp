// Proves the distributed harness runs real MPI traffic on every rank and checks it element by
// element; the hidden self-test proves that one failing rank fails the whole run.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdint>
#include <sstream>
#include <vector>

#include "dist_support.hpp"
#include "line_prefix_streambuf.hpp"

using namespace tensortree::test;

namespace {

constexpr int kCount = 513;  // odd, so no power-of-two chunking hides a missing element

std::vector<double> rank_values(int rank, int count) {
  std::vector<double> values(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) values[static_cast<std::size_t>(i)] = rank_value(rank, i);
  return values;
}

}  // namespace

TEST_CASE("every rank knows the world size and holds a distinct rank") {
  const int size = world_size();
  REQUIRE(size >= 2);
  std::vector<int> ranks(static_cast<std::size_t>(size), -1);
  const int mine = world_rank();
  MPI_Allgather(&mine, 1, MPI_INT, ranks.data(), 1, MPI_INT, world_comm());
  for (int r = 0; r < size; ++r) CHECK(ranks[static_cast<std::size_t>(r)] == r);
}

TEST_CASE("the harness grants the thread level that background progress needs") {
  CHECK(mpi_thread_level() == MPI_THREAD_MULTIPLE);
}

TEST_CASE("a ring exchange delivers the left neighbour's rank-tagged values to every rank") {
  const int rank = world_rank();
  const std::vector<double> sent = rank_values(rank, kCount);
  std::vector<double> received(kCount, 0.0);
  MPI_Sendrecv(sent.data(), kCount, MPI_DOUBLE, right_neighbour(rank), 7, received.data(), kCount,
               MPI_DOUBLE, left_neighbour(rank), 7, world_comm(), MPI_STATUS_IGNORE);
  const int left = left_neighbour(rank);
  for (int i = 0; i < kCount; ++i) {
    INFO("element " << i << " from rank " << left);
    REQUIRE(received[static_cast<std::size_t>(i)] == rank_value(left, i));
  }
}

TEST_CASE("allgather gives every rank each rank's own values in rank order") {
  const int size = world_size();
  const std::vector<double> mine = rank_values(world_rank(), kCount);
  std::vector<double> gathered(static_cast<std::size_t>(size) * kCount, 0.0);
  MPI_Allgather(mine.data(), kCount, MPI_DOUBLE, gathered.data(), kCount, MPI_DOUBLE, world_comm());
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < kCount; ++i) {
      INFO("rank " << r << " element " << i);
      REQUIRE(gathered[static_cast<std::size_t>(r) * kCount + static_cast<std::size_t>(i)] ==
              rank_value(r, i));
    }
  }
}

TEST_CASE("allreduce sums every rank's values into the closed-form total") {
  const int size = world_size();
  std::vector<std::int64_t> values(kCount);
  for (int i = 0; i < kCount; ++i) {
    values[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(rank_value(world_rank(), i));
  }
  MPI_Allreduce(MPI_IN_PLACE, values.data(), kCount, MPI_INT64_T, MPI_SUM, world_comm());
  // sum over r of 1000 (r + 1) + i + 1 = 1000 n (n + 1) / 2 + n (i + 1)
  for (int i = 0; i < kCount; ++i) {
    const std::int64_t expected = 1000LL * size * (size + 1) / 2 + static_cast<std::int64_t>(size) * (i + 1);
    INFO("element " << i);
    REQUIRE(values[static_cast<std::size_t>(i)] == expected);
  }
}

TEST_CASE("broadcast from the last rank replaces every rank's own values") {
  const int root = world_size() - 1;
  std::vector<float> values(kCount);
  for (int i = 0; i < kCount; ++i) {
    values[static_cast<std::size_t>(i)] = static_cast<float>(rank_value(world_rank(), i));
  }
  MPI_Bcast(values.data(), kCount, MPI_FLOAT, root, world_comm());
  for (int i = 0; i < kCount; ++i) {
    INFO("element " << i);
    REQUIRE(values[static_cast<std::size_t>(i)] == static_cast<float>(rank_value(root, i)));
  }
}

TEST_CASE("on_every_rank is false on all ranks when a single rank says no") {
  CHECK(on_every_rank(true));
  const int dissenter = world_size() - 1;
  CHECK_FALSE(on_every_rank(world_rank() != dissenter));
}

TEST_CASE("the line prefixer tags every line, including a last one without a newline") {
  std::stringbuf sink;
  {
    LinePrefixStreambuf tagged(&sink, "[rank 3] ");
    std::ostream stream(&tagged);
    stream << "first\n" << std::flush << "sec" << std::flush << "ond\n\nlast";
  }
  CHECK(sink.str() == "[rank 3] first\n[rank 3] second\n[rank 3] \n[rank 3] last\n");
}

// Run only by the should_fail Meson test: the whole job must fail although ranks 0, 2, ... pass.
TEST_CASE("self-test: only rank 1 fails, so the harness fails the run on every rank", "[.selftest]") {
  barrier();  // every rank is alive and in step when rank 1 reports its failure
  CHECK(world_rank() != 1);
}
