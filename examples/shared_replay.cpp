// shared_replay: a replay buffer and a weight publication shared by processes, in a few lines.
// The learner creates the buffer in /dev/shm and publishes its weights; an actor (a forked child
// here, any process on this node in general) opens both by name, acts with the newest weights and
// extends the buffer; the learner samples a batch and checks it. examples/shared_job is the whole
// job: many actors, versions, a killed actor, every element checked.
//
//   shared_replay
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tensortree/policy_version.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/weights.hpp"

using namespace tensortree;

int main() {
  const std::string name = "shared_replay_" + std::to_string(::getpid());
  const std::filesystem::path dir = ReplayBuffer::shared_memory_path(name);
  if (::fork() == 0) {  // the actor: waits for the weights, then opens the buffer the learner made first
    const WeightSubscriber weights(name);
    ReplayBuffer replay = ReplayBuffer::open(dir);
    const WeightLease lease = weights.latest();
    TensorTree trajectory(Shape{100});
    trajectory.set("step", Tensor::arange({100}, 0));
    trajectory.set("action", Tensor::full({100}, lease.tree().get("w").at<float>({0})));  // acts with them
    stamp_policy_version(trajectory, static_cast<std::int64_t>(lease.version()));
    replay.extend(trajectory);
    std::_Exit(0);
  }
  ReplayBuffer replay = ReplayBuffer::create(dir, {.capacity = 1024});
  WeightPublisher publisher(name);
  TensorTree params(Shape{});
  params.set("w", Tensor::full({4}, 7.0));
  publisher.publish(params);  // version 1

  int status = 0;
  ::wait(&status);
  const ReplaySample sample = replay.sample(32);  // rows 0..99 hold steps 0..99
  int wrong = 0;
  for (std::int64_t i = 0; i < 32; ++i) {
    const auto row = static_cast<float>(sample.indices[static_cast<std::size_t>(i)]);
    wrong += sample.batch.get("step").at<float>({i}) != row ||
             sample.batch.get("action").at<float>({i}) != 7.0F ||
             sample.batch.get(kPolicyVersionKey).at<std::int64_t>({i}) != 1;
  }
  std::printf("sampled 32 of %lld rows, %d wrong\n", static_cast<long long>(replay.size()), wrong);
  std::filesystem::remove_all(dir);
  return wrong == 0 && status == 0 ? 0 : 1;
}
