// libtorch_learner: actors ship trajectories as trees; the learner hands them to libtorch without a
// copy (tensortree/torch.hpp) and runs a gradient step of a linear model on each batch.
//
// Every actor's rows are obs (rows x dim) and target = obs . w_true, made from (seed, actor, step)
// so the learner can recompute and check every element it receives. The learner fits w to them
// with plain ATen ops and exits 1 unless the loss falls and w reaches w_true.
//
//   mpiexec -n 3 libtorch_learner [--steps 150 --rows 64 --dim 8 --lr 0.1 --seed 0]
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_program.hpp"
#include "tensortree/tensortree.hpp"
#include "tensortree/torch.hpp"

using namespace tensortree;

namespace {

struct Options {
  int steps = 150;
  int rows = 64;
  int dim = 8;
  double lr = 0.1;
  int seed = 0;
};

// The weights every actor's targets come from: w_true[j] = (j + 1) / dim, alternating in sign.
std::vector<float> true_weights(int dim) {
  std::vector<float> w(static_cast<std::size_t>(dim));
  for (int j = 0; j < dim; ++j) w[static_cast<std::size_t>(j)] = static_cast<float>((j % 2 ? -1 : 1) * (j + 1.0) / dim);
  return w;
}

// A value in [-1, 1) that depends on every argument (splitmix64's finalizer).
float uniform(std::uint64_t seed, std::uint64_t actor, std::uint64_t step, std::uint64_t index) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ULL + (actor << 48) + (step << 24) + index;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) / static_cast<double>(1ULL << 23) - 1.0);
}

// Writes actor `actor`'s trajectory of step `step` into `tree` (obs and target, in place).
void fill_trajectory(const TensorTree& tree, const Options& o, int actor, int step) {
  const std::vector<float> w = true_weights(o.dim);
  float* obs = tree.get("obs").data<float>();
  float* target = tree.get("target").data<float>();
  for (int r = 0; r < o.rows; ++r) {
    double dot = 0;
    for (int j = 0; j < o.dim; ++j) {
      const float x = uniform(static_cast<std::uint64_t>(o.seed), static_cast<std::uint64_t>(actor),
                              static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(r * o.dim + j));
      obs[r * o.dim + j] = x;
      dot += static_cast<double>(x) * w[static_cast<std::size_t>(j)];
    }
    target[r] = static_cast<float>(dot);
  }
}

TensorTree trajectory_tree(const Options& o) {
  TensorTree tree(Shape{o.rows});
  tree.set("obs", Tensor::zeros({o.rows, o.dim}, {DType::Float32}));
  tree.set("target", Tensor::zeros({o.rows}, {DType::Float32}));
  return tree.consolidate();
}

int act(const Group& world, const Options& o) {
  TensorTree tree = trajectory_tree(o);
  fill_trajectory(tree, o, world.rank(), 0);
  tree.init_remote(0, world);  // the learner learns the layout once; later sends carry data only
  for (int step = 1; step < o.steps; ++step) {
    fill_trajectory(tree, o, world.rank(), step);
    tree.send(0, world);
  }
  return 0;
}

// What a receive must have produced, element for element.
bool holds_expected(const TensorTree& received, const TensorTree& expected, int actor, int step) {
  if (received.equal(expected)) return true;
  std::fprintf(stderr, "learner: actor %d's trajectory of step %d differs from what it must hold\n", actor, step);
  return false;
}

int learn(const Group& world, const Options& o) {
  std::vector<TensorTree> from_actor;
  for (int actor = 1; actor < world.size(); ++actor) from_actor.push_back(TensorTree::from_remote_init(actor, world));
  const TensorTree expected = trajectory_tree(o);

  at::Tensor w = at::zeros({o.dim}, at::kFloat);
  double first_loss = -1, loss = 0;
  for (int step = 0; step < o.steps; ++step) {
    for (int actor = 1; actor < world.size(); ++actor) {
      TensorTree& batch = from_actor[static_cast<std::size_t>(actor - 1)];
      if (step > 0) batch.recv(actor, world);
      fill_trajectory(expected, o, actor, step);
      if (!holds_expected(batch, expected, actor, step)) return 1;

      // The learner's step reads the received buffer itself: no copy into libtorch.
      const at::Tensor obs = to_torch(batch.get("obs"));
      const at::Tensor target = to_torch(batch.get("target"));
      if (obs.data_ptr() != batch.get("obs").data_ptr()) {
        std::fprintf(stderr, "learner: to_torch copied the batch\n");
        return 1;
      }
      const at::Tensor error = obs.matmul(w) - target;
      loss = error.pow(2).mean().item<double>();
      if (first_loss < 0) first_loss = loss;
      w -= o.lr * 2.0 / o.rows * obs.t().matmul(error);
    }
  }
  const std::vector<float> w_true = true_weights(o.dim);
  const double distance = (w - at::tensor(w_true)).norm().item<double>();
  std::printf("libtorch_learner: %d actors x %d steps of %d x %d; loss %.3g -> %.3g, |w - w_true| = %.3g\n",
              world.size() - 1, o.steps, o.rows, o.dim, first_loss, loss, distance);
  const bool learned = loss < first_loss * 1e-3 && distance < 1e-2;
  std::printf("libtorch_learner: %s\n", learned ? "every trajectory checked, the model learned" : "FAILED to learn");
  return learned ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const auto add_flags = [](CLI::App& app, Options& o) {
    app.add_option("--steps", o.steps, "trajectories each actor sends")->check(CLI::Range(1, 1 << 20));
    app.add_option("--rows", o.rows, "rows per trajectory")->check(CLI::Range(1, 1 << 20));
    app.add_option("--dim", o.dim, "features per row")->check(CLI::Range(1, 1 << 12));
    app.add_option("--lr", o.lr, "learning rate")->check(CLI::PositiveNumber);
    app.add_option("--seed", o.seed, "varies the data");
  };
  const auto work = [](DistributedContext& context, const Options& o) {
    const Group& world = context.world();
    if (world.size() < 2) {
      mpi_program::complain("libtorch_learner needs at least 2 ranks: one learner and one or more actors");
      return 1;
    }
    return world.rank() == 0 ? learn(world, o) : act(world, o);
  };
  return mpi_program::run<Options>(argc, argv, "Actors send trajectories; a libtorch learner fits on them", add_flags,
                                   work);
}
