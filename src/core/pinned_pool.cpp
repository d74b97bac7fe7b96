#include "core/pinned_pool.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "core/checked_math.hpp"
#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/device.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

constexpr std::size_t kPageBytes = 4096;
constexpr std::align_val_t kHostAlignment{kByteAlignment};

}  // namespace

// The free buffers, shared by the pool and its leases.
class PinnedShelf {
 public:
  PinnedShelf(PinnedPoolOptions options, bool page_locked) : options_(options), page_locked_(page_locked) {}
  PinnedShelf(const PinnedShelf&) = delete;
  PinnedShelf& operator=(const PinnedShelf&) = delete;
  ~PinnedShelf() {
    for (const auto& [size, data] : free_) release(data);
  }

  bool page_locked() const { return page_locked_; }

  std::size_t cached_bytes() const {
    const std::lock_guard lock(mutex_);
    return cached_bytes_;
  }

  // A free buffer of `size` to 2 × `size` bytes, if the shelf holds one.
  std::pair<std::byte*, std::size_t> take(std::size_t size) {
    const std::lock_guard lock(mutex_);
    const auto found = free_.lower_bound(size);
    if (found == free_.end() || found->first / 2 > size) return {nullptr, 0};
    const std::pair<std::byte*, std::size_t> buffer{found->second, found->first};
    cached_bytes_ -= found->first;
    free_.erase(found);
    return buffer;
  }

  std::byte* allocate(std::size_t size) const {
    if (page_locked_) return static_cast<std::byte*>(cuda::alloc_pinned(size));
    return static_cast<std::byte*>(::operator new(size, kHostAlignment));
  }

  // Keeps the buffer for reuse while the bounds allow, frees it otherwise.
  void give_back(std::byte* data, std::size_t size) noexcept {
    {
      const std::lock_guard lock(mutex_);
      if (free_.size() < options_.max_cached_buffers && cached_bytes_ + size <= options_.max_cached_bytes) {
        free_.emplace(size, data);
        cached_bytes_ += size;
        return;
      }
    }
    release(data);
  }

 private:
  void release(std::byte* data) const noexcept {
    if (page_locked_) {
      cuda::free_pinned(data);
    } else {
      ::operator delete(data, kHostAlignment);
    }
  }

  const PinnedPoolOptions options_;
  const bool page_locked_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, std::byte*> free_;
  std::size_t cached_bytes_ = 0;
};

// ---- PinnedLease --------------------------------------------------------------------------------------

PinnedLease::PinnedLease(std::shared_ptr<PinnedShelf> shelf, std::byte* data, std::size_t size)
    : shelf_(std::move(shelf)), data_(data), size_(size) {}

PinnedLease::PinnedLease(PinnedLease&& other) noexcept
    : shelf_(std::move(other.shelf_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

PinnedLease& PinnedLease::operator=(PinnedLease&& other) noexcept {
  if (this != &other) {
    end();
    shelf_ = std::move(other.shelf_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedLease::~PinnedLease() { end(); }

void PinnedLease::end() noexcept {
  if (data_ != nullptr) shelf_->give_back(data_, size_);
  data_ = nullptr;
  size_ = 0;
  shelf_.reset();
}

// ---- PinnedPool ---------------------------------------------------------------------------------------

PinnedPool::PinnedPool(PinnedPoolOptions options)
    : shelf_(std::make_shared<PinnedShelf>(options, cuda::device_count() > 0)) {}

PinnedLease PinnedPool::acquire(std::size_t nbytes) {
  const std::optional<std::uint64_t> size = checked_align_up(std::max(nbytes, std::size_t{1}), kPageBytes);
  if (!size) throw InvalidArgument(fmt::format("a staging buffer of {} bytes is too large", nbytes));
  auto [data, found] = shelf_->take(*size);
  if (data == nullptr) {
    found = *size;
    data = shelf_->allocate(found);
  }
  return PinnedLease(shelf_, data, found);
}

StoragePtr PinnedPool::storage(std::size_t nbytes) {
  auto lease = std::make_shared<PinnedLease>(acquire(nbytes));
  std::byte* data = lease->data();
  // The deleter owns the lease: the buffer goes back to the pool when the last view of it ends.
  return Storage::adopt(data, nbytes, Device::cpu(), [lease = std::move(lease)](void*) mutable { lease.reset(); });
}

bool PinnedPool::page_locked() const { return shelf_->page_locked(); }

std::size_t PinnedPool::cached_bytes() const { return shelf_->cached_bytes(); }

PinnedPool& PinnedPool::shared() {
  static auto* const pool = new PinnedPool();
  return *pool;
}

}  // namespace tensortree::detail
