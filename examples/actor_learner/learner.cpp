// The learner: receives trajectories from whichever actor is ready, stacks --batch of them into a
// learner batch, and every --broadcast-every batches broadcasts the parameters to the actors.
//
// Receives go into a pool of consolidated trees shaped like the actors' first trajectory, so each
// arrives as one message straight into its buffer. Where the group can receive from any source
// (any_source_transport(device).capabilities().any_source), irecv(kAnySource) takes whichever
// actor sent first and the Work's source_rank() names it; elsewhere (NCCL) the learner keeps receives posted to every actor.
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checks.hpp"
#include "expected.hpp"
#include "job.hpp"
#include "output.hpp"
#include "progress.hpp"
#include "tensortree/tensortree.hpp"

namespace actor_learner {

using namespace tensortree;

namespace {

struct Posted {
  TensorTree* tree;
  WorkPtr work;
};

class Learner {
 public:
  Learner(const DistributedContext& context, const Options& o, const Protocol& protocol, Device device)
      : world_(context.world()),
        o_(o),
        protocol_(protocol),
        device_(device),
        any_source_(world_.any_source_transport(device).capabilities().any_source),
        progress_(o, protocol),
        left_(static_cast<std::size_t>(protocol.actors) + 1, 0),
        next_seq_(static_cast<std::size_t>(protocol.actors) + 1, 1) {}

  std::int64_t run() {
    progress_.headline(device_.str(), std::string(world_.any_source_transport(device_).name()));
    handshake();
    // Consolidated once: the in-place updates below keep it so, and each broadcast sends its buffer.
    TensorTree params = make_params(0, device_).consolidate();
    params.broadcast(kLearner, world_);

    progress_.start();
    for (int round = 0; round < protocol_.rounds(); ++round) {
      receive_round(round);
      if (protocol_.broadcast_after(round)) {
        // A "training step": the next parameters, written in place.
        const TensorTree next = make_params(round + 1, device_);
        next.for_each_leaf([&](const Path& path, const Tensor& leaf) { params.get(path).copy_(leaf); });
        params.broadcast(kLearner, world_);
        progress_.broadcast_sent();
      }
    }
    progress_.summary(verdicts_);
    return verdicts_.failures();
  }

 private:
  // One from_remote_init per actor: its layout and its first trajectory (seq 0).
  void handshake() {
    for (int actor = 1; actor <= protocol_.actors; ++actor) {
      const TensorTree first = TensorTree::from_remote_init(actor, world_);
      check_first_trajectory(verdicts_, first, o_, actor);
      if (actor == 1) make_pool(first);
    }
  }

  // Every actor can have two sends in flight while a batch is being gathered. The trees live at
  // fixed addresses: an irecv in flight refers to its tree.
  void make_pool(const TensorTree& first) {
    progress_.measure(first);
    for (int i = 0; i < 2 * protocol_.actors + o_.batch; ++i) {
      pool_.push_back(std::make_unique<TensorTree>(first.consolidate()));
      free_.push_back(pool_.back().get());
    }
  }

  void receive_round(int round) {
    for (int actor = 1; actor <= protocol_.actors; ++actor) left_[actor] = protocol_.share(round, actor);
    any_source_ ? receive_from_any(round) : receive_from_each(round);
  }

  // Receives are matched in the order they were posted, so the oldest completes first. Each actor
  // has at most two sends in flight: 2 x actors receives cover them all. No more than the round's
  // total are posted (the actors send nothing of the next round before this round's broadcast).
  void receive_from_any(int round) {
    const std::int64_t total = protocol_.trajectories_in(round);
    const auto window = static_cast<std::size_t>(2 * protocol_.actors);
    std::int64_t posted = 0;
    std::deque<Posted> in_flight;
    for (std::int64_t received = 0; received < total; ++received) {
      for (; in_flight.size() < window && posted < total; ++posted) {
        TensorTree* tree = take_free();
        in_flight.push_back({tree, tree->irecv(kAnySource, world_, {.tag = kTrajectoryTag})});
      }
      const Posted done = in_flight.front();
      in_flight.pop_front();
      done.work->wait();
      handle(done.tree, done.work->source_rank(), round);
    }
  }

  // Two receives per actor (at most its share of the round); whichever actor's oldest receive has
  // completed is handled first.
  void receive_from_each(int round) {
    const std::int64_t total = protocol_.trajectories_in(round);
    std::vector<std::int64_t> to_post = left_;
    std::vector<std::deque<Posted>> queues(left_.size());
    for (std::int64_t received = 0; received < total;) {
      for (int actor = 1; actor <= protocol_.actors; ++actor) {
        for (; queues[actor].size() < 2 && to_post[actor] > 0; --to_post[actor]) {
          TensorTree* tree = take_free();
          queues[actor].push_back({tree, tree->irecv(actor, world_, {.tag = kTrajectoryTag})});
        }
      }
      bool progressed = false;
      for (int actor = 1; actor <= protocol_.actors; ++actor) {
        std::deque<Posted>& queue = queues[actor];
        if (queue.empty() || !queue.front().work->is_completed()) continue;
        const Posted done = queue.front();
        queue.pop_front();
        done.work->wait();  // rethrows what the receive failed with
        handle(done.tree, actor, round);
        ++received;
        progressed = true;
      }
      if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  TensorTree* take_free() {
    TensorTree* tree = free_.back();
    free_.pop_back();
    return tree;
  }

  // Checks one arrived trajectory and adds it to the batch being gathered.
  void handle(TensorTree* tree, int actor, int round) {
    if (actor < 1 || actor > protocol_.actors) {
      verdicts_.fail(format("a trajectory came from rank %d, which is not an actor", actor));
      free_.push_back(tree);
      return;
    }
    verdicts_.expect(left_[actor]-- > 0, format("actor %d sent more than its %" PRId64 " trajectories of round %d",
                                               actor, protocol_.share(round, actor), round));
    progress_.trajectory_from(actor);
    // Messages from one actor arrive in the order it sent them: its sequence numbers count up.
    const Stamp stamp{actor, next_seq_[actor]++, round};
    expected_ += check_trajectory(verdicts_, tree->to(Device::cpu()), o_, stamp);
    gathered_.push_back(tree);
    if (gathered_.size() == static_cast<std::size_t>(o_.batch)) learn_from_batch();
  }

  // Stacks the gathered trajectories into one learner batch (the place to train on it).
  void learn_from_batch() {
    std::vector<TensorTree> trees;
    for (TensorTree* tree : gathered_) trees.push_back(*tree);
    const TensorTree batch = TensorTree::stack(trees);
    progress_.batch_learned(check_batch(verdicts_, progress_.batches() + 1, trees, batch, expected_, o_));
    for (TensorTree* tree : gathered_) free_.push_back(tree);
    gathered_.clear();
    expected_ = {};
  }

  const Group& world_;
  const Options& o_;
  const Protocol& protocol_;
  Device device_;
  bool any_source_;
  Verdicts verdicts_{"learner"};
  Progress progress_;
  std::vector<std::unique_ptr<TensorTree>> pool_;
  std::vector<TensorTree*> free_;
  std::vector<TensorTree*> gathered_;
  TrajectoryStats expected_;  // what the batch being gathered must sum to
  // Indexed by rank ([0] unused): the trajectories of this round still to come, and the next sequence number.
  std::vector<std::int64_t> left_;
  std::vector<std::int64_t> next_seq_;
};

}  // namespace

std::int64_t run_learner(const DistributedContext& context, const Options& o, const Protocol& protocol,
                         Device device) {
  return Learner(context, o, protocol, device).run();
}

}  // namespace actor_learner
