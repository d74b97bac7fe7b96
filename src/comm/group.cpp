#include "tensortree/group.hpp"

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <utility>

#include "comm/collective_check.hpp"
#include "comm/group_state.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

// The positive integer in environment variable `name`, or nullopt where it is unset or empty;
// InvalidArgument naming `unit` for anything else.
std::optional<std::uint64_t> positive_from_environment(const char* name, const char* unit) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  // strtoull accepts a sign (and negates); only digits are a number here.
  if (errno != 0 || *end != '\0' || value == 0 || text[0] < '0' || text[0] > '9' ||
      value > static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max())) {
    throw InvalidArgument(fmt::format("{} must be a positive number of {}, got '{}'", name, unit, text));
  }
  return value;
}

// The value of environment variable `name` among `choices` (name, value); unset or empty is
// `fallback`, anything else InvalidArgument listing the names.
template <class Enum>
using Choices = std::array<std::pair<std::string_view, Enum>, 3>;

constexpr Choices<HostTransport> kHostTransports{
    {{"auto", HostTransport::Auto}, {"mpi", HostTransport::Mpi}, {"shm", HostTransport::SharedMemory}}};
constexpr Choices<CudaTransport> kCudaTransports{
    {{"auto", CudaTransport::Auto}, {"nccl", CudaTransport::Nccl}, {"staged", CudaTransport::Staged}}};

template <class Enum>
Enum choice_from_environment(const char* name, const Choices<Enum>& choices, Enum fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  for (const auto& [choice, value] : choices) {
    if (choice == text) return value;
  }
  throw InvalidArgument(
      fmt::format("{} must be one of {}, got '{}'", name, fmt::join(choices | std::views::keys, ", "), text));
}

}  // namespace

ResolvedGroupOptions GroupOptions::resolve() const {
  ResolvedGroupOptions resolved;
  if (timeout) {
    resolved.timeout = *timeout;
  } else if (const auto milliseconds = positive_from_environment("TENSORTREE_TIMEOUT_MS", "milliseconds")) {
    resolved.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(*milliseconds));
  }
  if (resolved.timeout <= std::chrono::milliseconds::zero()) {
    throw InvalidArgument(fmt::format("GroupOptions::timeout must be positive, got {} ms", resolved.timeout.count()));
  }
  if (max_message_bytes) {
    resolved.max_message_bytes = *max_message_bytes;
  } else if (const auto bytes = positive_from_environment("TENSORTREE_MAX_MESSAGE_BYTES", "bytes")) {
    resolved.max_message_bytes = *bytes;
  }
  resolved.debug_checks = debug_checks ? *debug_checks : dist::detail::debug_setting_from_environment();
  resolved.host_transport = host_transport ? *host_transport
                                           : choice_from_environment("TENSORTREE_HOST_TRANSPORT", kHostTransports,
                                                                     resolved.host_transport);
  resolved.cuda_transport = cuda_transport ? *cuda_transport
                                           : choice_from_environment("TENSORTREE_CUDA_TRANSPORT", kCudaTransports,
                                                                     resolved.cuda_transport);
  return resolved;
}

Group::Group(std::shared_ptr<detail::GroupState> state) : state_(std::move(state)) {}

int Group::rank() const { return state_ ? state_->rank() : -1; }

int Group::size() const { return state_ ? state_->size() : 0; }

const std::vector<int>& Group::world_ranks() const {
  static const std::vector<int> no_ranks;
  return state_ ? state_->world_ranks() : no_ranks;
}

const ResolvedGroupOptions& Group::options() const {
  static const ResolvedGroupOptions defaults;
  return state_ ? state_->options() : defaults;
}

Collectives& Group::collectives(Device device) const {
  return detail::GroupAccess::require(*this).collectives(device);
}

PeerTransport& Group::transport(int peer, Device device) const {
  return detail::GroupAccess::require(*this).transport(peer, device);
}

PeerTransport& Group::any_source_transport(Device device) const {
  return detail::GroupAccess::require(*this).any_source(device);
}

void Group::abort(const std::string& reason) const {
  if (state_ && state_->is_member()) state_->abort(reason);
}

bool Group::is_aborted() const { return state_ && state_->is_aborted(); }

}  // namespace tensortree
