// ImportedRegions: the receiver's side of the node-local transport. A peer's region is opened once
// (mapping a memfd, opening a CUDA IPC handle: the costly step) and reused for every later transfer
// from it; the least recently used mapping goes when more than `capacity` are open. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "transport/shm/shareable_memory.hpp"

namespace tensortree::detail {

class ImportedRegions {
 public:
  ImportedRegions(ShareableMemory& memory, std::size_t capacity) : memory_(memory), capacity_(capacity) {}

  // `peer`'s region `handle`, with at least `nbytes` readable: the open one when it has them,
  // opened (again) otherwise. What opening throws, naming what was wrong, goes to the caller.
  std::shared_ptr<ImportedRegion> open(int peer, const RegionHandle& handle, std::uint64_t nbytes);
  // Closes the mapping of `peer`'s region `handle`, if open (at once: no copy holds a region its
  // sender lets go, as each transfer is acknowledged after its copy).
  void forget(int peer, const RegionHandle& handle);

 private:
  struct Entry {
    std::shared_ptr<ImportedRegion> region;
    std::uint64_t last_use = 0;
  };

  ShareableMemory& memory_;
  std::size_t capacity_;
  std::mutex mutex_;
  std::map<std::pair<int, RegionHandle>, Entry> entries_;
  std::uint64_t uses_ = 0;
};

}  // namespace tensortree::detail
