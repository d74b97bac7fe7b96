// The actor: fills trajectories and ships them to the learner.
//
// A trajectory is a nested tree of batch size [T, B]:
//   obs uint8 [T, B, 3, H, W]   action int64 [T, B]   reward float32 [T, B]   done bool [T, B]
//   next/obs uint8 [T, B, 3, H, W]   info/{episode_return float32, episode_len int64} [T, B]
//   meta/{actor, seq, version int64, obs_xxh3 uint64} [T, B]
// One init_remote teaches the learner the layout; after it every trajectory goes with isend, out of
// two consolidated trees: one is filled while the other is in flight.
#include <cinttypes>
#include <cstdint>
#include <string>

#include "checks.hpp"
#include "expected.hpp"
#include "job.hpp"
#include "output.hpp"
#include "tensortree/tensortree.hpp"

namespace actor_learner {

using namespace tensortree;

namespace {

TensorTree make_trajectory(const Options& o, Device device) {
  const Shape tb{o.T, o.B};
  const Shape image{o.T, o.B, 3, o.height, o.width};
  TensorTree tree(tb);
  tree.set("obs", Tensor::zeros(image, {DType::UInt8, device}));
  tree.set("action", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("reward", Tensor::zeros(tb, {DType::Float32, device}));
  tree.set("done", Tensor::zeros(tb, {DType::Bool, device}));
  tree.set("next.obs", Tensor::zeros(image, {DType::UInt8, device}));
  tree.set("info.episode_return", Tensor::zeros(tb, {DType::Float32, device}));
  tree.set("info.episode_len", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.actor", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.seq", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.version", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.obs_xxh3", Tensor::zeros(tb, {DType::UInt64, device}));
  return tree;
}

}  // namespace

std::int64_t run_actor(const DistributedContext& context, const Options& o, const Protocol& protocol, Device device) {
  const Group& world = context.world();
  const int rank = context.rank();
  Verdicts verdicts("actor " + std::to_string(rank));

  // Two consolidated trees, each sent as one message.
  TensorTree slots[2] = {make_trajectory(o, device).consolidate(), make_trajectory(o, device).consolidate()};
  WorkPtr in_flight[2];
  const TrajectoryWriter acting(o, slots[0]);

  // The handshake: the learner learns the layout from the first trajectory (seq 0), and checks it.
  std::int64_t version = 0;
  acting.write(slots[0], {rank, 0, version});
  slots[0].init_remote(kLearner, world);

  // Every rank takes part in each broadcast; this one brings parameter version 0.
  TensorTree params;
  params.broadcast(kLearner, world);
  check_params(verdicts, params, version, rank);

  std::int64_t seq = 1;
  std::int64_t sent = 0;
  for (int round = 0; round < protocol.rounds(); ++round) {
    for (std::int64_t k = protocol.share(round, rank); k > 0; --k, ++seq) {
      TensorTree& slot = slots[seq % 2];
      WorkPtr& previous = in_flight[seq % 2];
      if (previous) previous->wait();  // the tree's last send must be out before it is refilled
      acting.write(slot, {rank, seq, version});
      previous = slot.isend(kLearner, world, {.tag = kTrajectoryTag});
      ++sent;
    }
    if (protocol.broadcast_after(round)) {
      params.broadcast(kLearner, world);
      check_params(verdicts, params, round + 1, rank);
      version = params.to(Device::cpu()).get("version").data<std::int64_t>()[0];
    }
  }
  for (WorkPtr& work : in_flight) {
    if (work) work->wait();
  }
  say(format("[actor %d] sent %" PRId64 " trajectories, saw parameter versions 0..%" PRId64 ", %" PRId64
             "/%" PRId64 " checks passed",
             rank, sent, version, verdicts.passed(), verdicts.checks()));
  return verdicts.failures();
}

}  // namespace actor_learner
