// bench_channel's MPI column: the same trees as its channel rows, moved by TensorTree::send and
// TensorTree::recv between two MPI ranks (rank 1 sends, rank 0 receives into a consolidated tree of
// the layout), on the world group as it comes (TENSORTREE_HOST_TRANSPORT may choose its transport).
// One untimed transfer, then `rounds` + 1 rounds of `count` transfers, each opened by a barrier
// and timed on rank 0 from just before it until the last receive; the first round is not counted.
// Rank 0 checks the last tree, every value, and prints "seconds_per_message S" (the median round,
// per message).
// bench_channel runs it under mpirun; by hand:
//
//   mpirun -n 2 bench_channel_mpi --tree 4x16777216 --count 1 --rounds 7
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_channel_tree.hpp"
#include "mpi_program.hpp"
#include "tensortree/dist_ops.hpp"

using namespace tensortree;

namespace {

constexpr int kReceiver = 0;
constexpr int kSender = 1;

struct Options {
  std::string tree = "1x256";
  int count = 1000;
  int rounds = 7;
};

int measure(const DistributedContext& context, const Options& o) {
  const Group& world = context.world();
  bench::check(world.size() == 2, "bench_channel_mpi runs on 2 ranks");
  const bool receiver = world.rank() == kReceiver;
  const bench::TreeShape shape = bench::TreeShape::parse(o.tree);
  const TensorTree expected = bench::make_channel_tree(shape).consolidate();
  TensorTree tree = receiver ? bench::zeroed_channel_tree(shape) : expected;
  const auto transfer = [&] { receiver ? (void)tree.recv(kSender, world) : tree.send(kReceiver, world); };
  transfer();
  std::vector<double> seconds;
  for (int round = 0; round <= o.rounds; ++round) {
    // The clock starts before the barrier: were rank 0 descheduled after it, the sender's trees
    // would otherwise queue up untimed.
    const auto start = std::chrono::steady_clock::now();
    dist::barrier(world);
    for (int i = 0; i < o.count; ++i) transfer();
    if (round > 0) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (!receiver) return 0;
  bench::check(tree.is_consolidated() && tree.equal(expected), "the last tree MPI delivered differs from the tree sent");
  std::sort(seconds.begin(), seconds.end());
  std::printf("seconds_per_message %.9g\n", seconds[seconds.size() / 2] / o.count);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mpi_program::run<Options>(
      argc, argv, "bench_channel's MPI column: trees by TensorTree::send/recv between two ranks",
      [](CLI::App& app, Options& o) {
        app.add_option("--tree", o.tree, "the tree: LEAVESxBYTES (bytes per leaf)");
        app.add_option("--count", o.count, "trees per round")->check(CLI::PositiveNumber);
        app.add_option("--rounds", o.rounds, "timed rounds (the median is reported)")->check(CLI::PositiveNumber);
      },
      measure);
}
