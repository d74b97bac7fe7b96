#include "comm/group_state.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "comm/group_collectives.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

GroupState::GroupState(std::unique_ptr<Bootstrap> bootstrap, std::shared_ptr<TransportFactory> factory,
                       std::vector<int> world_ranks, GroupOptions options)
    : bootstrap_(std::move(bootstrap)),
      factory_(std::move(factory)),
      world_ranks_(std::move(world_ranks)),
      requested_(options),
      options_(options.resolve()) {
  if (!bootstrap_ || !factory_) throw InvalidArgument("a member's GroupState needs a bootstrap and a transport factory");
  if (bootstrap_->size() != size()) {
    throw BackendError(fmt::format("a bootstrap of {} ranks for a group of world ranks {}", bootstrap_->size(),
                                   world_ranks_));
  }
  rank_ = bootstrap_->rank();
  placements_ = decode_placements(bootstrap_->all_gather(encode_placement(this_placement())));
  mappable_.assign(placements_.size(), 0);
  // Decided alike everywhere: every member holds the same placements.
  if (any_shared_node(placements_)) {
    const std::vector<std::uint8_t> mine = probe_peers(placements_, rank_);
    const std::vector<std::byte> gathered = bootstrap_->all_gather(std::as_bytes(std::span(mine)));
    mappable_ = mutually_mappable(gathered, rank_, size());
  }
}

GroupState::GroupState(std::vector<int> world_ranks, GroupOptions options)
    : world_ranks_(std::move(world_ranks)), requested_(options), options_(options.resolve()) {}

// Attachments and transports go before the bootstrap (member order); attachments first, as they
// may hold buffers a transport registered.
GroupState::~GroupState() = default;

void GroupState::require_member() const {
  if (rank_ < 0) {
    throw InvalidArgument(fmt::format("this process is not a member of the group of world ranks {}",
                                      world_ranks_));
  }
  aborted_.throw_if_raised(
      [&] { return fmt::format("the group of world ranks {} on its rank {}", world_ranks_, rank_); });
}

void GroupState::abort(const std::string& reason) {
  aborted_.raise(reason);
  const std::lock_guard lock(transports_mutex_);
  // A transport that serves several peers is told once; an engine told again through the group's
  // collectives keeps the first reason (every abort ignores the calls after the first).
  std::set<const void*> told;
  for (auto& [device, table] : transports_) {
    if (told.insert(dynamic_cast<const void*>(table.collectives.get())).second) table.collectives->abort(reason);
    for (const auto& peer : table.peers) {
      if (told.insert(dynamic_cast<const void*>(peer.get())).second) peer->abort(reason);
    }
    // Usually one of the peers' already; a factory may give the group a separate one.
    if (table.any_source && told.insert(dynamic_cast<const void*>(table.any_source.get())).second) {
      table.any_source->abort(reason);
    }
  }
}

void GroupState::abort_with(std::shared_ptr<GroupAbortDomain> domain) {
  std::weak_ptr<GroupState> self = weak_from_this();
  // Enrolled unowned, the state would never be told.
  if (!domain || self.expired()) throw InvalidArgument("abort_with needs a domain and a state owned by a shared_ptr");
  abort_domain_ = std::move(domain);
  abort_domain_->enroll(self);
}

Bootstrap& GroupState::bootstrap() {
  require_member();
  return *bootstrap_;
}

const DeviceTransports& GroupState::transports(Device device) {
  require_member();
  const Device resolved = device.is_cpu() ? Device::cpu() : resolve_device(device);
  const std::lock_guard lock(transports_mutex_);
  const auto key = std::pair(resolved.type(), resolved.index());
  const auto found = transports_.find(key);
  if (found != transports_.end()) return found->second;
  DeviceTransports made = factory_->create(*this, resolved);
  const bool complete =
      made.collectives && made.any_source && made.peers.size() == static_cast<std::size_t>(size()) &&
      std::all_of(made.peers.begin(), made.peers.end(), [](const auto& peer) { return peer != nullptr; });
  if (!complete) {
    throw BackendError(fmt::format("the transport factory gave an incomplete table for a group of {} ranks", size()));
  }
  made.collectives = std::make_shared<GroupCollectives>(std::move(made.collectives), made.peers, counters_);
  return transports_.emplace(key, std::move(made)).first->second;
}

Collectives& GroupState::collectives(Device device) { return *transports(device).collectives; }

PeerTransport& GroupState::any_source(Device device) { return *transports(device).any_source; }

PeerTransport& GroupState::transport(int peer, Device device) {
  require_member();
  if (peer < 0 || peer >= size()) {
    throw InvalidArgument(fmt::format("transport: peer {} is not a rank of a group of {}", peer, size()));
  }
  return *transports(device).peers[static_cast<std::size_t>(peer)];
}

WorkPtr GroupState::progressing(Device device, const PeerTransport& posted_on, WorkPtr work, const char* operation) {
  // transports() put a GroupCollectives in every table.
  const auto& collectives = static_cast<const GroupCollectives&>(*transports(device).collectives);
  return collectives.progressing(std::move(work), operation, &posted_on);
}

std::shared_ptr<GroupState> GroupState::split(int color, int key, std::vector<int> world_ranks, GroupOptions options) {
  options.resolve();  // a bad TENSORTREE_* value throws before the collective step, on every rank alike
  std::unique_ptr<Bootstrap> sub = bootstrap().split(color, key);
  if (!sub) return std::make_shared<GroupState>(std::move(world_ranks), options);
  auto made = std::make_shared<GroupState>(std::move(sub), factory_, std::move(world_ranks), options);
  if (abort_domain_) made->abort_with(abort_domain_);
  return made;
}

GroupState& GroupAccess::require(const Group& group) {
  if (!group.state_) throw InvalidArgument("an empty Group has no communicator (get groups from a DistributedContext)");
  return *group.state_;
}

}  // namespace tensortree::detail
