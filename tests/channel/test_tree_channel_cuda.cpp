// Tree channels carrying CUDA trees, staged through page-locked host memory: a tree packed on one
// thread's GPU arrives on the other thread's current GPU, every element as sent; recv_into fills a
// consolidated CUDA tree; weight versions of CUDA parameters reach an actor on its GPU. Two UCX
// nodes in one process (threads), as two processes on one GPU have. SKIP (77) without a device.
#include <atomic>

#include "channel_learner.hpp"
#include "tensortree/channel_weights.hpp"
#include "thread_actor.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

const Device kGpu = Device::cuda(0);

}  // namespace

TEST_CASE("a channel carries CUDA trees both ways, every element as sent, on the receiver's GPU") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  std::string actor_problem;
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    for (std::int64_t sequence = 0; sequence < 4; ++sequence) {
      const TensorTree tree = channel.recv();
      if (!tree.device() || !tree.device()->is_cuda()) actor_problem += " (not on a GPU)";
      actor_problem += check_channel_tree(tree.to(Device::cpu()), 2 * kRows);
      channel.send(channel_tree(7, sequence, kRows).to(kGpu));
    }
  });
  TreeChannel channel = accept_one(listener);
  TensorTree into = channel_tree(0, 0, kRows).to(kGpu).consolidate();
  for (std::int64_t sequence = 0; sequence < 4; ++sequence) {
    channel.send(channel_tree(0, sequence, 2 * kRows).to(kGpu));
    if (sequence % 2 == 0) {
      const TensorTree tree = channel.recv();
      REQUIRE(tree.device() == kGpu);
      TreeIdentity identity{};
      CHECK(check_channel_tree(tree.to(Device::cpu()), kRows, &identity).empty());
      CHECK(identity.sequence == sequence);
    } else {
      channel.recv_into(into);
      TreeIdentity identity{};
      CHECK(check_channel_tree(into.to(Device::cpu()), kRows, &identity).empty());
      CHECK(identity.sequence == sequence);
    }
  }
  CHECK_THROWS_AS(channel.recv(), ChannelClosed);
  REQUIRE(actor.join() == "");
  CHECK(actor_problem.empty());
}

TEST_CASE("weight versions of CUDA parameters reach an actor on its GPU") {
  TreeListener listener = TreeListener::bind("127.0.0.1:0");
  ChannelWeightPublisher weights;
  std::atomic<bool> learner_done = false;
  std::string problem;
  std::atomic<std::uint64_t> last = 0;
  const auto params_of = [](std::uint64_t version) {
    return TensorTree::from_map({}, {{"w", Tensor::arange({256, 9}, static_cast<double>(version), 0.5)}});
  };
  ThreadActor actor(listener, [&](TreeChannel& channel) {
    while (last < 10) {
      std::optional<ChannelWeights> newest = take_newest_weights(channel, 20ms);
      if (!newest) continue;
      if (newest->params.device() != kGpu) problem += " (not on the GPU)";
      if (!newest->params.to(Device::cpu()).equal(params_of(newest->version))) problem += " (values differ)";
      last = newest->version;
    }
    while (!learner_done) take_newest_weights(channel, 5ms);
  });
  TreeChannel channel = accept_one(listener);
  for (std::uint64_t version = 1; version <= 10; ++version) {
    weights.publish(params_of(version).to(kGpu));
    const Clock::time_point turn_ends = Clock::now() + 10ms;
    while (Clock::now() < turn_ends) weights.offer_to(channel);
  }
  CHECK(channel.flush(10s));
  const Clock::time_point until = Clock::now() + 10s;
  while (last < 10 && Clock::now() < until) weights.offer_to(channel);
  learner_done = true;
  REQUIRE(actor.join() == "");
  CHECK(problem.empty());
  CHECK(last == 10);
}
