#include "comm/group_abort_domain.hpp"

#include <utility>

#include "comm/group_state.hpp"

namespace tensortree::detail {

void GroupAbortDomain::forget_dropped_locked() {
  std::erase_if(groups_, [](const std::weak_ptr<GroupState>& group) { return group.expired(); });
}

void GroupAbortDomain::enroll(const std::weak_ptr<GroupState>& group) {
  std::optional<std::string> reason;
  {
    const std::lock_guard lock(mutex_);
    forget_dropped_locked();
    groups_.push_back(group);
    reason = reason_;
  }
  // Outside the lock: a group's abort tells its transports, which take locks of their own.
  if (!reason) return;
  if (const std::shared_ptr<GroupState> alive = group.lock()) alive->abort(*reason);
}

void GroupAbortDomain::abort(const std::string& reason) {
  std::vector<std::shared_ptr<GroupState>> alive;
  {
    const std::lock_guard lock(mutex_);
    if (reason_) return;
    reason_ = reason;
    for (const std::weak_ptr<GroupState>& group : groups_) {
      if (std::shared_ptr<GroupState> locked = group.lock()) alive.push_back(std::move(locked));
    }
  }
  for (const std::shared_ptr<GroupState>& group : alive) group->abort(reason);
}

bool GroupAbortDomain::is_aborted() const {
  const std::lock_guard lock(mutex_);
  return reason_.has_value();
}

std::size_t GroupAbortDomain::remembered() const {
  const std::lock_guard lock(mutex_);
  return groups_.size();
}

}  // namespace tensortree::detail
