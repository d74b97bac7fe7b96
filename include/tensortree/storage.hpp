// A block of bytes on one device, shared by every tensor that views it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tensortree/device.hpp"
#include "tensortree/export.hpp"

namespace tensortree {

namespace detail {
struct StorageAccess;
}  // namespace detail

enum class MemoryKind : unsigned char {
  Host,        // pageable host memory, 64-byte aligned
  PinnedHost,  // page-locked host memory (cudaHostAlloc), for fast and async GPU transfers
  Device,      // CUDA device memory
  SharedHost,  // host memory in an anonymous memfd that other processes can map (allocate_shared)
  Foreign,     // adopted from another owner; released through its deleter
};

class TT_API Storage {
 public:
  using Deleter = std::function<void(void*)>;

  // Allocates `nbytes` on `device`; `pinned` asks for page-locked memory when `device` is the CPU.
  static std::shared_ptr<Storage> allocate(std::size_t nbytes, Device device, bool pinned = false);
  // Takes ownership of memory that someone else allocated; `deleter(data)` runs exactly once,
  // when the last tensor viewing it goes away (never if adopt throws: the caller still owns it).
  static std::shared_ptr<Storage> adopt(void* data, std::size_t nbytes, Device device,
                                        Deleter deleter);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  std::byte* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  MemoryKind kind() const { return kind_; }
  bool is_pinned() const { return kind_ == MemoryKind::PinnedHost; }

  // ---- memory other processes can map (storage_shared.cpp) ---------------------------------
  // `nbytes` of zero-filled host memory in an anonymous memfd, mapped MAP_SHARED: a forked child
  // shares it, and another process maps the same pages from shared_fd() (received over a Unix
  // socket or opened as /proc/<pid>/fd/<fd>). The file is sealed at that size, so a process that
  // maps it can trust its length. BackendError naming the failing call otherwise.
  static std::shared_ptr<Storage> allocate_shared(std::size_t nbytes);
  // Maps the whole of the shared-memory file `fd` read-write (the storage keeps its own duplicate
  // of `fd`; the caller still owns and closes its own).
  static std::shared_ptr<Storage> map_shared(int fd);
  // The file descriptor of the shared memory behind this storage, or -1 for any other memory.
  int shared_fd() const { return shared_fd_; }

 private:
  friend struct detail::StorageAccess;

  Storage(std::byte* data, std::size_t nbytes, Device device, MemoryKind kind, Deleter deleter);

  std::byte* data_;
  std::size_t nbytes_;
  Device device_;
  MemoryKind kind_;
  Deleter deleter_;
  int shared_fd_ = -1;
};

using StoragePtr = std::shared_ptr<Storage>;

}  // namespace tensortree
