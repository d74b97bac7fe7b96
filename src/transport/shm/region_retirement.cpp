#include "transport/shm/region_retirement.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "core/storage_access.hpp"

namespace tensortree::detail {

struct RegionRetirement::Shared {
  struct Region {
    std::vector<bool> readers;  // by group rank: may map it
    StoragePtr memory;          // set once let go: what is freed with the record
  };
  struct Peer {
    std::vector<RegionHandle> asked;
    bool closed = false;
  };

  explicit Shared(int peers) : peers(static_cast<std::size_t>(peers)) {}

  // Frees the record of a let-go region that no peer may map any more.
  void free_if_unread(std::map<RegionHandle, Region>::iterator found) {
    const Region& region = found->second;
    if (region.memory && std::none_of(region.readers.begin(), region.readers.end(), [](bool r) { return r; })) {
      regions.erase(found);
      --let_go_count;
    }
  }

  void let_go(const RegionHandle& handle, StoragePtr memory) {
    const std::lock_guard lock(mutex);
    const auto found = regions.find(handle);
    if (found == regions.end()) return;  // frees `memory` on return
    found->second.memory = std::move(memory);
    ++let_go_count;
    free_if_unread(found);
  }

  mutable std::mutex mutex;
  std::map<RegionHandle, Region> regions;
  std::size_t let_go_count = 0;  // records whose memory waits for a reader: none, and a send asks nothing
  std::vector<Peer> peers;
};

RegionRetirement::RegionRetirement(int peers) : shared_(std::make_shared<Shared>(peers)) {}

void RegionRetirement::track(const ExportedRegion& region) {
  {
    const std::lock_guard lock(shared_->mutex);
    const std::size_t peers = shared_->peers.size();
    shared_->regions[region.handle] = {std::vector<bool>(peers), nullptr};
  }
  StorageAccess::hand_over_on_release(
      *region.storage, [weak = std::weak_ptr<Shared>(shared_), handle = region.handle](StoragePtr memory) {
        const std::shared_ptr<Shared> shared = weak.lock();
        if (!shared) return;  // nobody is left to ask: the memory goes
        try {
          shared->let_go(handle, std::move(memory));
        } catch (...) {
          // Nothing throws there but the lock; the memory then goes at once, as before retirement.
        }
      });
}

void RegionRetirement::read_by(const RegionHandle& handle, int peer) {
  const std::lock_guard lock(shared_->mutex);
  const auto found = shared_->regions.find(handle);
  if (found != shared_->regions.end()) found->second.readers[static_cast<std::size_t>(peer)] = true;
}

std::vector<RegionHandle> RegionRetirement::next_request(int peer, std::size_t limit) {
  const std::lock_guard lock(shared_->mutex);
  const auto index = static_cast<std::size_t>(peer);
  Shared::Peer& state = shared_->peers[index];
  // While a request is unanswered none of its regions is asked for again: they all wait in it.
  if (shared_->let_go_count == 0 || !state.asked.empty() || state.closed) return {};
  for (const auto& [handle, region] : shared_->regions) {
    if (state.asked.size() == limit) break;
    if (region.memory && region.readers[index]) state.asked.push_back(handle);
  }
  return state.asked;
}

void RegionRetirement::released(int peer) {
  const std::lock_guard lock(shared_->mutex);
  const auto index = static_cast<std::size_t>(peer);
  for (const RegionHandle& handle : std::exchange(shared_->peers[index].asked, {})) {
    const auto found = shared_->regions.find(handle);
    if (found == shared_->regions.end()) continue;
    found->second.readers[index] = false;
    shared_->free_if_unread(found);
  }
}

void RegionRetirement::peer_closed(int peer) {
  const std::lock_guard lock(shared_->mutex);
  const auto index = static_cast<std::size_t>(peer);
  shared_->peers[index] = {{}, true};
  for (auto region = shared_->regions.begin(); region != shared_->regions.end();) {
    const auto current = region++;
    current->second.readers[index] = false;
    shared_->free_if_unread(current);
  }
}

}  // namespace tensortree::detail
