// Buffers reused across transfers: few, because each is as large as a whole tree. A free one (only
// the pool holds it) is handed out again, the least recently added is let go when the pool is full,
// so a steady stream of messages of one size allocates nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

#include "tensortree/device.hpp"
#include "tensortree/storage.hpp"

namespace tensortree::detail {

class BufferPool {
 public:
  // A buffer of at least `nbytes` on `device` that nobody else holds, or a new one from `allocate()`.
  template <class Allocate>
  StoragePtr take(std::size_t nbytes, Device device, Allocate&& allocate) {
    std::lock_guard lock(mutex_);
    // A spare whose memory a receive gave to a tree (StorageAccess::take_memory) is empty: let go.
    std::erase_if(buffers_, [](const StoragePtr& b) { return b.use_count() == 1 && b->nbytes() == 0; });
    StoragePtr* best = nullptr;
    for (StoragePtr& buffer : buffers_) {
      if (buffer.use_count() != 1 || buffer->device() != device || buffer->nbytes() < nbytes) continue;
      if (!best || buffer->nbytes() < (*best)->nbytes()) best = &buffer;
    }
    if (best) return *best;
    StoragePtr fresh = allocate();
    if (buffers_.size() == kCapacity) evict_one();
    buffers_.push_back(fresh);
    return fresh;
  }

 private:
  static constexpr std::size_t kCapacity = 16;

  void evict_one() {
    const auto free = std::find_if(buffers_.begin(), buffers_.end(), [](const StoragePtr& b) { return b.use_count() == 1; });
    buffers_.erase(free != buffers_.end() ? free : buffers_.begin());
  }

  std::mutex mutex_;
  std::vector<StoragePtr> buffers_;
};

}  // namespace tensortree::detail
