#include "transport/shm/imported_regions.hpp"

#include <algorithm>

namespace tensortree::detail {

std::shared_ptr<ImportedRegion> ImportedRegions::open(int peer, const RegionHandle& handle, std::uint64_t nbytes) {
  const std::lock_guard lock(mutex_);
  Entry& entry = entries_[{peer, handle}];
  entry.last_use = ++uses_;
  if (!entry.region || entry.region->mapped_bytes() < nbytes) {
    entry.region = nullptr;
    try {
      entry.region = memory_.open(handle, nbytes);
    } catch (...) {
      entries_.erase({peer, handle});
      throw;
    }
  }
  std::shared_ptr<ImportedRegion> region = entry.region;
  if (entries_.size() > capacity_) {
    const auto oldest = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
      return a.second.last_use < b.second.last_use;
    });
    entries_.erase(oldest);
  }
  return region;
}

void ImportedRegions::forget(int peer, const RegionHandle& handle) {
  std::shared_ptr<ImportedRegion> closing;  // closed after the lock is let go
  const std::lock_guard lock(mutex_);
  const auto found = entries_.find({peer, handle});
  if (found == entries_.end()) return;
  closing = std::move(found->second.region);
  entries_.erase(found);
}

}  // namespace tensortree::detail
