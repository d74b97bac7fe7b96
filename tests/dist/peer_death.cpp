// A peer that dies mid-job, as seen by the survivors (run by run_peer_death.py under Open MPI's
// recovery mode, where the launcher lets the survivors run on). The last rank kills itself with
// SIGKILL after a first checked all_reduce. Each survivor then checks that every kind of wait on
// the dead rank ends within the group's timeout in Timeout or BackendError (never a hang, never a
// crash), that a group of survivors made beforehand still works, that Group::abort refuses the
// broken group, and that the process ends cleanly; it writes "ok" (or what failed) to
// $TT_PEER_DEATH_RESULTS/rank-N, since the launcher does not report survivors' exit codes there.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = std::chrono::milliseconds(1500);
// The deadline a wait must keep: the timeout, plus room for a loaded machine.
constexpr auto kDeadline = kTimeout * 4;

class Report {
 public:
  explicit Report(int rank) : rank_(rank) {}

  void check(bool condition, const std::string& what) {
    if (!condition) failures_ << "rank " << rank_ << ": " << what << "\n";
  }

  // `operation` must end in Timeout or BackendError within kDeadline.
  void check_fails_in_time(const std::string& name, const std::function<void()>& operation) {
    const auto started = Clock::now();
    std::string outcome = "no error";
    try {
      operation();
    } catch (const Timeout&) {
      outcome = "Timeout";
    } catch (const BackendError&) {
      outcome = "BackendError";
    } catch (const std::exception& error) {
      outcome = std::string("unexpected error: ") + error.what();
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    std::cout << "rank " << rank_ << ": " << name << " -> " << outcome << " after " << took.count() << " ms\n";
    check(outcome == "Timeout" || outcome == "BackendError", name + " ended with " + outcome);
    check(took <= kDeadline, name + " took " + std::to_string(took.count()) + " ms");
  }

  void write() const {
    const char* directory = std::getenv("TT_PEER_DEATH_RESULTS");
    if (!directory) return;
    std::ofstream(std::string(directory) + "/rank-" + std::to_string(rank_))
        << (failures_.str().empty() ? "ok\n" : failures_.str());
  }

 private:
  int rank_;
  std::ostringstream failures_;
};

Tensor rank_values(int rank, std::int64_t count) {
  return Tensor::arange({count}, 1 + rank * 1000, 1, {DType::Int64});
}

// The element-wise sum of rank_values over `ranks`, checked element by element.
bool holds_sum_of(const Tensor& summed, const std::vector<int>& ranks) {
  const auto* values = static_cast<const std::int64_t*>(summed.data_ptr());
  for (std::int64_t i = 0; i < summed.numel(); ++i) {
    std::int64_t expected = 0;
    for (const int rank : ranks) expected += 1 + rank * 1000 + i;
    if (values[i] != expected) return false;
  }
  return true;
}

void survive(const DistributedContext& context, const Group& survivors, int victim, Report& report) {
  const Group& world = context.world();
  const int rank = world.rank();
  Tensor summed = rank_values(rank, 256);
  report.check_fails_in_time("all_reduce with the dead rank", [&] { dist::all_reduce(summed, world); });
  report.check_fails_in_time("recv from the dead rank", [&] {
    dist::recv(Tensor::empty({256}, {DType::Int64}), victim, world);
  });
  report.check_fails_in_time("1 MiB send to the dead rank", [&] {
    // From the memory the transport sends from as it is (as a tree send packs into), so that the
    // send waits for its receiver over shared memory too: a plain tensor would be copied out and
    // sent eagerly there, completing without the peer.
    const Tensor payload(world.transport(victim, Device::cpu()).allocate_message_buffer(8 << 17, Device::cpu()), 0,
                         DType::Int64, {1 << 17}, {});
    payload.copy_(rank_values(rank, 1 << 17));
    dist::send(payload, victim, world);
  });
  report.check_fails_in_time("tree send to the dead rank", [&] {
    TensorTree tree(Shape{4});
    tree.set("x", rank_values(rank, 1 << 17).reshape({4, 1 << 15}));
    tree.send(victim, world);
  });
  report.check_fails_in_time("tree broadcast from the dead rank", [&] {
    TensorTree tree(Shape{4});
    tree.set("x", Tensor::zeros({4, 8}));
    tree.broadcast(victim, world);
  });
  {
    const auto started = Clock::now();
    WorkPtr dropped = dist::all_reduce_async(rank_values(rank, 256), world);
    dropped.reset();  // without a wait
    report.check(Clock::now() - started <= kDeadline, "dropping an all_reduce in flight hung");
  }
  report.check_fails_in_time("new_group over the dead rank", [&] { context.new_group({0, 1}); });

  // The survivors' own group goes on.
  Tensor among_survivors = rank_values(rank, 1024);
  dist::all_reduce(among_survivors, survivors);
  std::vector<int> survivor_ranks(survivors.world_ranks());
  report.check(holds_sum_of(among_survivors, survivor_ranks), "all_reduce among the survivors gave wrong values");

  world.abort("rank " + std::to_string(victim) + " died");
  report.check(world.is_aborted(), "world is not marked aborted");
  try {
    dist::barrier(world);
    report.check(false, "an aborted group ran a barrier");
  } catch (const BackendError& error) {
    report.check(std::string(error.what()).find("died") != std::string::npos,
                 std::string("the abort's error does not give the reason: ") + error.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  GroupOptions options;
  options.timeout = kTimeout;
  DistributedContext context(&argc, &argv, options);
  const Group& world = context.world();
  if (world.size() < 3) {
    std::cerr << "peer_death needs at least 3 ranks (one to die, two to go on)\n";
    return 2;
  }
  const int victim = world.size() - 1;
  std::vector<int> survivor_ranks;
  for (int r = 0; r < victim; ++r) survivor_ranks.push_back(r);
  const Group survivors = context.new_group(survivor_ranks);

  Report report(world.rank());
  Tensor summed = rank_values(world.rank(), 256);
  dist::all_reduce(summed, world);
  std::vector<int> everyone(survivor_ranks);
  everyone.push_back(victim);
  report.check(holds_sum_of(summed, everyone), "the first all_reduce gave wrong values");

  if (world.rank() == victim) raise(SIGKILL);
  survive(context, survivors, victim, report);
  report.write();
  std::cout << "rank " << world.rank() << ": finishing\n";
  return 0;
}
