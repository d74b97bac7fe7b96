#include "comm/abandoned_operations.hpp"

#include <mutex>
#include <utility>
#include <vector>

#include "core/wait_bounded.hpp"

namespace tensortree::detail {

namespace {

struct Abandoned {
  std::mutex mutex;
  std::vector<std::function<bool()>> operations;
};

// Never destroyed: at exit the transfers it holds may still be in flight, and their buffers and
// handles must not be freed under them (nor after the transport itself has shut down).
Abandoned& abandoned() {
  static auto* const registry = new Abandoned;
  return *registry;
}

// With the registry locked.
void release_finished(Abandoned& registry) {
  std::erase_if(registry.operations, [](std::function<bool()>& operation) { return operation(); });
}

}  // namespace

void abandon_unless_completed(WorkPtr work) {
  if (work->is_completed()) return;
  abandon_operation([work = std::move(work)]() noexcept {
    try {
      return work->is_completed();
    } catch (...) {
      return true;
    }
  });
}

void abandon_operation(std::function<bool()> finished) {
  Abandoned& registry = abandoned();
  const std::lock_guard lock(registry.mutex);
  release_finished(registry);
  if (!finished()) registry.operations.push_back(std::move(finished));
}

bool settle_abandoned_operations(std::chrono::milliseconds limit) {
  // Spinning: an MPI request progresses only inside its test.
  return poll_until([] { return abandoned_operations_held() == 0; }, deadline_after(limit), WaitStyle::Spin);
}

std::size_t abandoned_operations_held() {
  Abandoned& registry = abandoned();
  const std::lock_guard lock(registry.mutex);
  release_finished(registry);
  return registry.operations.size();
}

}  // namespace tensortree::detail
