// The POSIX pieces behind memmap: move-only owners of file descriptors and mappings, openat without
// following links, fsync, and OS errors reported as BackendError naming the call and the path.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/file_descriptor.hpp"

namespace tensortree::detail {

// BackendError "OS error <errno> (<strerror>) in <call> '<path>' at file:line".
[[noreturn]] void throw_os_error(std::string_view call, const std::filesystem::path& path, int err,
                                 const char* file, int line);
#define TT_OS_ERROR(call, path) ::tensortree::detail::throw_os_error((call), (path), errno, __FILE__, __LINE__)

// openat(2) with O_CLOEXEC | O_NOFOLLOW added: a symbolic link fails with ELOOP. Returns the
// descriptor, or an invalid one and the errno.
std::pair<FileDescriptor, int> open_at(int dir_fd, const std::string& name, int flags, mode_t mode = 0);
// Opens `path` (following links only in its parent components) or throws BackendError.
FileDescriptor open_path(const std::filesystem::path& path, int flags, mode_t mode = 0);

// One mmap'd region; munmap on destruction. A zero-length mapping holds nothing.
class Mapping {
 public:
  Mapping() = default;
  // MAP_SHARED, PROT_READ|PROT_WRITE when `writable`; MAP_PRIVATE copy-on-write otherwise.
  Mapping(int fd, std::size_t size, bool writable, const std::filesystem::path& path);
  Mapping(Mapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  // Gives up ownership: the caller munmaps (data, size).
  void* release();

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

void fsync_or_throw(int fd, const std::filesystem::path& path);
void fsync_directory(const std::filesystem::path& dir);
// Starts writing [offset, offset + n) of the file back to the device without waiting
// (sync_file_range), so that a later fsync finds it written. Only a hint: errors are left to fsync.
void start_writeback(int fd, std::uint64_t offset, std::uint64_t n) noexcept;
// fsync of every file and directory in `paths`, from several threads: the device merges flushes that
// arrive together, so many files cost about one flush of its cache instead of one each (and, unlike
// syncfs, nobody else's data is written). BackendError naming the first path that failed.
void fsync_all(const std::vector<std::filesystem::path>& paths);
// Removes `dir` and everything under it, ignoring errors. Files are unlinked by several threads: on
// file systems that discard freed blocks at once, each unlink waits for the device, and the waits overlap.
void remove_tree(const std::filesystem::path& dir) noexcept;
// Writes all of [data, data + n) at `offset`, retrying short writes and EINTR.
void write_all_at(int fd, const void* data, std::size_t n, std::uint64_t offset, const std::filesystem::path& path);
// Reads n bytes from `offset` of the file into [data, data + n), retrying short reads and EINTR;
// CorruptData naming the file when it ends first.
void read_all(int fd, void* data, std::size_t n, const std::filesystem::path& path, std::uint64_t offset = 0);

}  // namespace tensortree::detail
