// PinnedPool: page-locked host buffers for staging copies to and from CUDA devices, reused instead
// of allocated for every transfer (cudaHostAlloc is slow, and pinning memory costs the whole
// system). A lease hands out a buffer of at least the bytes asked for and returns it to the pool
// when it ends; the pool keeps a bounded number of free buffers and frees the rest.
//
// Without a usable CUDA device (a build without CUDA, or a machine without a GPU) the buffers are
// ordinary 64-byte-aligned host memory: whatever stages through them still works, only slower.
// Thread-safe. A lease may outlive its pool: the buffer is then freed when the lease ends.
#pragma once

#include <cstddef>
#include <memory>

#include "tensortree/storage.hpp"

namespace tensortree::detail {

class PinnedShelf;

class PinnedLease {
 public:
  PinnedLease() = default;
  PinnedLease(PinnedLease&& other) noexcept;
  PinnedLease& operator=(PinnedLease&& other) noexcept;
  PinnedLease(const PinnedLease&) = delete;
  PinnedLease& operator=(const PinnedLease&) = delete;
  ~PinnedLease();

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  friend class PinnedPool;
  PinnedLease(std::shared_ptr<PinnedShelf> shelf, std::byte* data, std::size_t size);
  void end() noexcept;

  std::shared_ptr<PinnedShelf> shelf_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

struct PinnedPoolOptions {
  std::size_t max_cached_bytes = std::size_t{256} << 20;  // free buffers kept, in bytes
  std::size_t max_cached_buffers = 32;                     // and in number
};

class PinnedPool {
 public:
  explicit PinnedPool(PinnedPoolOptions options = {});

  // A buffer of at least `nbytes` (at least one page, so never null): a free one no more than
  // twice that size when the pool has one, a new one otherwise.
  PinnedLease acquire(std::size_t nbytes);
  // The same lease as a CPU Storage of `nbytes`, for tensors; the lease ends with the storage.
  StoragePtr storage(std::size_t nbytes);

  // Whether the buffers are page-locked (a CUDA device was usable when the pool was made).
  bool page_locked() const;
  // Bytes in free buffers the pool keeps for reuse.
  std::size_t cached_bytes() const;

  // The process's pool, for staging anywhere in the library. Never destroyed: buffers may be
  // returned to it while static objects are torn down.
  static PinnedPool& shared();

 private:
  std::shared_ptr<PinnedShelf> shelf_;
};

}  // namespace tensortree::detail
