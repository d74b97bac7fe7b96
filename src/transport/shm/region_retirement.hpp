// RegionRetirement: the sender's regions after their last user let go. A peer that was sent a frame
// naming a region may keep it mapped (ImportedRegions caches the mapping), and CUDA leaves freeing
// memory another process still maps undefined; so a region's memory is freed only once every such
// peer has closed its mapping, at this rank's request (release requests, one in flight per peer),
// or closed its end of the group. A region no peer read is freed at once. Thread-safe; copies
// share one record, which lives while any copy does (a region let go after that is freed at once).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "transport/shm/shareable_memory.hpp"

namespace tensortree::detail {

class RegionRetirement {
 public:
  explicit RegionRetirement(int peers);

  // `region` (just allocated) comes here when its last user lets go, instead of being freed.
  void track(const ExportedRegion& region);
  // `peer` was sent a frame naming `region`: it may map it from now on.
  void read_by(const RegionHandle& handle, int peer);
  // The regions whose release `peer` is to be asked for now (at most `limit`): none while an
  // earlier request to it is unanswered. Those named count as asked until `released(peer)`.
  std::vector<RegionHandle> next_request(int peer, std::size_t limit);
  // `peer` closed its mappings of the regions of its last request.
  void released(int peer);
  // `peer` closed its end of the group: it maps none of this rank's regions any more, nor will.
  void peer_closed(int peer);

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace tensortree::detail
