// actor_learner: the main job. Rank 0 is the learner (learner.cpp), every other rank an actor
// (actor.cpp); job.hpp says who sends how much and when.
//
// Every element is checked without a side channel (expected.hpp, checks.hpp): each value derives
// from (seed, actor, sequence number, leaf, element index), and meta/ carries the actor, sequence
// number and parameter version, so the learner recomputes what every trajectory must hold; meta/
// obs_xxh3 holds the actor's XXH3 of each obs row, recomputed on arrival. The actors check every
// broadcast parameter. Any mismatch is printed (actor, seq, key, index, expected, got) and makes
// every rank exit 1.
//
//   mpiexec -n 3 actor_learner [--T 16 --B 8 --height 64 --width 64 --batches 200 --batch 4 --broadcast-every 5
//                              --report-every 40 --device cpu --seed 0]
#include <CLI/CLI.hpp>

#include <cinttypes>
#include <cstdint>
#include <string>

#include "job.hpp"
#include "mpi_program.hpp"
#include "output.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;
using namespace actor_learner;

namespace {

void add_flags(CLI::App& app, Options& o) {
  app.add_option("--T", o.T, "time steps per trajectory")->check(CLI::Range(1, 1 << 20));
  app.add_option("--B", o.B, "environments per trajectory")->check(CLI::Range(1, 1 << 20));
  app.add_option("--height", o.height, "observation height (obs is 3 x height x width)")->check(CLI::Range(1, 1 << 14));
  app.add_option("--width", o.width, "observation width")->check(CLI::Range(1, 1 << 14));
  app.add_option("--batches", o.batches, "learner batches to receive")->check(CLI::Range(1, 1 << 24));
  app.add_option("--batch", o.batch, "trajectories stacked into one learner batch")->check(CLI::Range(1, 1 << 16));
  app.add_option("--broadcast-every", o.broadcast_every, "broadcast the parameters every K batches")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--report-every", o.report_every, "print a progress line every N batches")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--device", o.device, "where the trees live")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", o.seed, "varies every generated value");
  app.add_option("--corrupt-seq", o.corrupt_seq,
                 "testing the checks: actor 1 flips one obs byte of its trajectory with this sequence number "
                 "(0 is the handshake), and the run must fail");
}

int run_job(const DistributedContext& context, const Options& o) {
  if (context.size() < 2) {
    complain("actor_learner needs at least 2 ranks (one learner, one actor): run it under mpiexec -n 3");
    return 1;
  }
  const auto device = mpi_program::device_named(context, o.device);
  if (!device) return 77;
  const Protocol protocol{context.size() - 1, o.batches, o.batch, o.broadcast_every};
  const std::int64_t failures = context.rank() == kLearner ? run_learner(context, o, protocol, *device)
                                                           : run_actor(context, o, protocol, *device);
  // Every rank exits 0 only when every rank's checks passed.
  const Tensor total = Tensor::full({1}, static_cast<double>(failures), {DType::Int64});
  dist::all_reduce(total, context.world(), ReduceOp::Sum);
  const std::int64_t all_failures = total.data<std::int64_t>()[0];
  if (context.rank() == kLearner) {
    say(all_failures == 0 ? std::string("[learner] all checks passed on every rank")
                          : format("[learner] FAILED: %" PRId64 " check(s) failed across the ranks", all_failures));
  }
  return all_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return mpi_program::run<Options>(
      argc, argv, "The main job: rank 0 learns from trajectories that the other ranks act out; run under mpiexec",
      add_flags, run_job);
}
