// What every rank of the actor-learner job knows: its flags, who sends how much and when, and the
// two roles (actor.cpp, learner.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "tensortree/device.hpp"
#include "tensortree/dist_context.hpp"

namespace actor_learner {

constexpr int kLearner = 0;
constexpr int kTrajectoryTag = 1;

struct Options {
  std::int64_t T = 16;
  std::int64_t B = 8;
  std::int64_t height = 64;
  std::int64_t width = 64;
  int batches = 200;
  int batch = 4;
  int broadcast_every = 5;
  int report_every = 40;
  std::string device = "cpu";
  std::uint64_t seed = 0;
  std::int64_t corrupt_seq = -1;  // testing the checks: actor 1 damages this trajectory
};

// The batches are split into rounds of broadcast_every batches; in a round each actor sends a share
// of the round's trajectories that every rank can compute, and after every round but the last, all
// ranks take part in a parameter broadcast. A trajectory sent in round r thus carries version r.
struct Protocol {
  int actors;
  int batches;
  int batch;
  int broadcast_every;

  int rounds() const { return (batches + broadcast_every - 1) / broadcast_every; }
  int batches_in(int round) const { return std::min(broadcast_every, batches - round * broadcast_every); }
  std::int64_t trajectories_in(int round) const { return std::int64_t{batches_in(round)} * batch; }
  // Actor ranks are 1..actors; the remainder of a round's split rotates so that no actor always
  // sends the extra trajectory.
  std::int64_t share(int round, int actor_rank) const {
    const std::int64_t total = trajectories_in(round);
    const std::int64_t index = (actor_rank - 1 + round) % actors;
    return total / actors + (index < total % actors ? 1 : 0);
  }
  bool broadcast_after(int round) const { return round + 1 < rounds(); }
};

// Each role returns how many of its checks failed.
std::int64_t run_actor(const tensortree::DistributedContext& context, const Options& o, const Protocol& protocol,
                       tensortree::Device device);
std::int64_t run_learner(const tensortree::DistributedContext& context, const Options& o, const Protocol& protocol,
                         tensortree::Device device);

}  // namespace actor_learner
