#include "runtime/in_process_world.hpp"

#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/group_abort_domain.hpp"
#include "comm/group_state.hpp"
#include "core/text_format.hpp"
#include "runtime/transport_factory.hpp"
#include "transport/in_process/in_process_bootstrap.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// What the threads of one run share: their world groups and the first failure. Every group of
// the run (each thread's world group and every group split from one, DeviceMesh dimensions
// included) belongs to one abort domain, so that nobody waits for the rank that failed, in
// whichever group.
class World {
 public:
  explicit World(std::shared_ptr<InProcessStore> store) : store_(std::move(store)) {}

  void joined(const Group& group) {
    GroupAccess::state(group)->abort_with(aborts_);
    // Kept until every thread has ended: no rank's world group goes while a peer may still use it.
    const std::lock_guard lock(mutex_);
    groups_.push_back(group);
  }

  // The first failure is kept; the rest of the world is told.
  void failed(int rank, std::exception_ptr error) {
    std::string reason;
    {
      const std::lock_guard lock(mutex_);
      if (failure_) return;
      failure_ = std::move(error);
      reason = fmt::format("rank {} of the in-process world failed", rank);
    }
    store_->abort(reason);
    aborts_->abort(reason);
  }

  void rethrow_failure() const {
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  std::shared_ptr<InProcessStore> store_;
  std::shared_ptr<GroupAbortDomain> aborts_ = std::make_shared<GroupAbortDomain>();
  std::mutex mutex_;
  std::vector<Group> groups_;
  std::exception_ptr failure_;
};

}  // namespace

void run_in_process(int size, const GroupOptions& options, const std::function<void(const Group&)>& body) {
  std::vector<std::unique_ptr<InProcessBootstrap>> bootstraps =
      make_in_process_bootstraps(size, options.resolve().timeout);
  World world(bootstraps.front()->store());
  const auto factory = std::make_shared<DefaultTransportFactory>();
  std::vector<int> world_ranks(static_cast<std::size_t>(size));
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank, bootstrap = std::move(bootstraps[static_cast<std::size_t>(rank)])]() mutable {
      try {
        const Group group =
            GroupAccess::make(std::make_shared<GroupState>(std::move(bootstrap), factory, world_ranks, options));
        world.joined(group);
        body(group);
      } catch (...) {
        world.failed(rank, std::current_exception());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  world.rethrow_failure();
}

}  // namespace tensortree::detail
