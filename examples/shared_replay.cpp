// shared_replay: actors and a learner sharing one replay buffer through a memory-mapped tree, with
// no tensor ever sent as a message (seed 004's shared-storage workflow).
//
// Rank 0 preallocates the buffer on disk with empty_memmap (sparse files: nothing is written but
// metadata) and broadcasts its directory. Each actor rank maps it read-write and writes its
// trajectory into its own rows. After a barrier, the learner (rank 0) maps the same directory,
// samples random rows and checks every value against the actor and step that must have written it.
//
//   mpiexec -n 3 shared_replay [--steps 64] [--batch 32] [--dir /shared/nfs/replay_parent]
#include <CLI/CLI.hpp>

#include <boost/serialization/string.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tensortree/dist_context.hpp"
#include "tensortree/dist_objects.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kObsDim = 4;

// What actor `actor` writes at step `t`: every value names both, so a row landing anywhere but in
// its own place, or two actors overlapping, shows up in the learner's check.
float obs_value(int actor, std::int64_t t, std::int64_t j) { return static_cast<float>(actor * 100000 + t * 10 + j); }
std::int64_t action_value(int actor, std::int64_t t) { return actor * 1000 + t; }
float reward_value(int actor, std::int64_t t) { return static_cast<float>(actor) + static_cast<float>(t) / 1024; }
bool done_value(std::int64_t t, std::int64_t steps) { return t == steps - 1; }

// One transition; the replay buffer is this with a leading capacity dimension.
TensorTree step_template() {
  TensorTree step(Shape{});
  step.set("obs", Tensor::zeros({kObsDim}, {DType::Float32}));
  step.set("action", Tensor::zeros({}, {DType::Int64}));
  step.set(Path{"next", "reward"}, Tensor::zeros({}, {DType::Float32}));
  step.set(Path{"next", "done"}, Tensor::zeros({}, {DType::Bool}));
  return step;
}

TensorTree trajectory(int actor, std::int64_t steps) {
  TensorTree traj(Shape{steps});
  Tensor obs = Tensor::empty({steps, kObsDim}, {DType::Float32});
  Tensor action = Tensor::empty({steps}, {DType::Int64});
  Tensor reward = Tensor::empty({steps}, {DType::Float32});
  Tensor done = Tensor::empty({steps}, {DType::Bool});
  for (std::int64_t t = 0; t < steps; ++t) {
    for (std::int64_t j = 0; j < kObsDim; ++j) obs.at<float>({t, j}) = obs_value(actor, t, j);
    action.at<std::int64_t>({t}) = action_value(actor, t);
    reward.at<float>({t}) = reward_value(actor, t);
    done.at<bool>({t}) = done_value(t, steps);
  }
  traj.set("obs", obs);
  traj.set("action", action);
  traj.set(Path{"next", "reward"}, reward);
  traj.set(Path{"next", "done"}, done);
  return traj;
}

// Rows of the sampled batch that differ from what their actor wrote.
int check_sample(const TensorTree& batch, const std::vector<std::int64_t>& rows, std::int64_t steps) {
  int wrong = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::int64_t>(i);
    const int actor = static_cast<int>(rows[i] / steps) + 1;
    const std::int64_t t = rows[i] % steps;
    bool ok = batch.get("action").at<std::int64_t>({r}) == action_value(actor, t) &&
              batch.get(Path{"next", "reward"}).at<float>({r}) == reward_value(actor, t) &&
              batch.get(Path{"next", "done"}).at<bool>({r}) == done_value(t, steps);
    for (std::int64_t j = 0; j < kObsDim; ++j) ok = ok && batch.get("obs").at<float>({r, j}) == obs_value(actor, t, j);
    if (!ok) {
      std::fprintf(stderr, "[learner] row %lld (actor %d, step %lld) holds the wrong values\n",
                   static_cast<long long>(rows[i]), actor, static_cast<long long>(t));
      ++wrong;
    }
  }
  return wrong;
}

int run(const DistributedContext& context, std::int64_t steps, int batch_size, const std::string& parent) {
  const Group& world = context.world();
  const int rank = context.rank();
  const int actors = context.size() - 1;
  if (actors < 1) throw InvalidArgument("shared_replay needs at least 2 ranks: a learner and an actor");
  const std::int64_t capacity = actors * steps;

  std::string dir;
  if (rank == 0) {
    std::string pattern = (parent.empty() ? fs::temp_directory_path() : fs::path(parent)) / "shared_replay_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw BackendError("mkdtemp failed for " + pattern);
    dir = pattern;
    (void)empty_memmap(dir, step_template(), {capacity});
    std::printf("[learner] preallocated %lld rows in %s\n", static_cast<long long>(capacity), dir.c_str());
  }
  dist::broadcast_object(dir, 0, world);

  int failures = 0;
  if (rank > 0) {
    // Each actor writes only rows [(rank - 1) * steps, rank * steps): no locks needed.
    const TensorTree replay = TensorTree::load_memmap(dir, {.mode = MemmapMode::ReadWrite});
    const TensorTree mine = replay.slice(0, {(rank - 1) * steps, rank * steps});
    const TensorTree traj = trajectory(rank, steps);
    for (const auto& [path, leaf] : traj.leaves()) mine.get(path).copy_(leaf);
    std::printf("[actor %d] wrote rows %lld..%lld\n", rank, static_cast<long long>((rank - 1) * steps),
                static_cast<long long>(rank * steps - 1));
  }
  dist::barrier(world);

  if (rank == 0) {
    const TensorTree replay = TensorTree::load_memmap(dir, {.random_access = true});
    std::mt19937_64 random(2024);
    std::uniform_int_distribution<std::int64_t> pick(0, capacity - 1);
    std::vector<std::int64_t> rows(static_cast<std::size_t>(batch_size));
    for (auto& row : rows) row = pick(random);
    Tensor index = Tensor::empty({batch_size}, {DType::Int64});
    for (int i = 0; i < batch_size; ++i) index.at<std::int64_t>({i}) = rows[static_cast<std::size_t>(i)];
    failures += check_sample(replay.index(index), rows, steps);
    // And every row once, so that no actor's write went missing.
    std::vector<std::int64_t> all(static_cast<std::size_t>(capacity));
    for (std::int64_t r = 0; r < capacity; ++r) all[static_cast<std::size_t>(r)] = r;
    failures += check_sample(replay.slice(0, {0, capacity}).clone(), all, steps);
    std::printf("[learner] sampled %d random rows and checked all %lld: %d wrong\n", batch_size,
                static_cast<long long>(capacity), failures);
  }
  dist::broadcast_object(failures, 0, world);
  if (rank == 0) fs::remove_all(dir);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Actors write trajectories into a shared memory-mapped replay tree; the learner samples it"};
  std::int64_t steps = 64;
  int batch = 32;
  std::string parent;
  app.add_option("--steps", steps, "steps each actor writes")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "rows the learner samples")->check(CLI::PositiveNumber);
  app.add_option("--dir", parent, "parent directory for the buffer (a shared filesystem across hosts)");
  CLI11_PARSE(app, argc, argv);

  int failures = 0;
  {
    DistributedContext context(&argc, &argv);
    try {
      failures = run(context, steps, batch, parent);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "[rank %d] shared_replay failed: %s\n", context.rank(), error.what());
      // Leaving without finalizing MPI makes mpiexec end the ranks waiting in a collective.
      std::exit(EXIT_FAILURE);
    }
  }
  return failures == 0 ? 0 : 1;
}
