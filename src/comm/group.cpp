#include "tensortree/group.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

#include "comm/group_state.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

GroupOptions GroupOptions::from_environment() {
  GroupOptions options;
  const char* text = std::getenv("TENSORTREE_TIMEOUT_MS");
  if (!text || !*text) return options;
  char* end = nullptr;
  errno = 0;
  const long long milliseconds = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || milliseconds <= 0) {
    throw InvalidArgument(std::string("TENSORTREE_TIMEOUT_MS must be a positive number of milliseconds, got '") +
                          text + "'");
  }
  options.timeout = std::chrono::milliseconds(milliseconds);
  return options;
}

Group::Group(std::shared_ptr<detail::GroupState> state) : state_(std::move(state)) {}

int Group::rank() const { return state_ ? state_->rank() : -1; }

int Group::size() const { return state_ ? state_->size() : 0; }

const std::vector<int>& Group::world_ranks() const {
  static const std::vector<int> no_ranks;
  return state_ ? state_->world_ranks() : no_ranks;
}

const GroupOptions& Group::options() const {
  static const GroupOptions defaults;
  return state_ ? state_->options() : defaults;
}

Backend& Group::backend(Device device) const { return detail::GroupAccess::require(*this).backend(device); }

Backend& Group::transport(int peer, Device device) const {
  return detail::GroupAccess::require(*this).transport(peer, device);
}

}  // namespace tensortree
