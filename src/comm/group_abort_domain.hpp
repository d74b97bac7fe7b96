// GroupAbortDomain: groups that are aborted together. A group that joins one hands it on to every
// group split from it (DeviceMesh dimensions included), so that aborting the domain ends the waits
// of the whole family at once: the threads of an in-process world (runtime/in_process_world.hpp),
// where one rank's failure must release the others wherever they wait. The domain holds its groups
// weakly: a group dropped by its users is destroyed as usual, and forgotten here.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tensortree::detail {

class GroupState;

class GroupAbortDomain {
 public:
  // Aborts `group` with the domain from now on; at once where the domain was aborted already (a
  // group made after the failure must not wait for the rank that failed either).
  void enroll(const std::weak_ptr<GroupState>& group);
  // GroupState::abort(reason) on every group of the domain that is still alive, and on every group
  // enrolled later. The first reason is kept; later calls change nothing.
  void abort(const std::string& reason);
  bool is_aborted() const;
  // The groups the domain still holds (weakly): the living, and those dropped since the last
  // enrollment, which forgets them.
  std::size_t remembered() const;

 private:
  void forget_dropped_locked();

  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<GroupState>> groups_;
  std::optional<std::string> reason_;
};

}  // namespace tensortree::detail
