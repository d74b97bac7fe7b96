#include "memmap/memmap_fs.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/foreign_error.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

void throw_os_error(std::string_view call, const std::filesystem::path& path, int err, const char* file,
                    int line) {
  throw_foreign_error("OS", fmt::format("{} '{}'", call, path.string()), std::strerror(err), err, file, line);
}

std::pair<FileDescriptor, int> open_at(int dir_fd, const std::string& name, int flags, mode_t mode) {
  int fd = -1;
  do {
    fd = ::openat(dir_fd, name.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, mode);
  } while (fd < 0 && errno == EINTR);
  const int err = fd < 0 ? errno : 0;
  return {FileDescriptor(fd), err};
}

FileDescriptor open_path(const std::filesystem::path& path, int flags, mode_t mode) {
  auto [fd, err] = open_at(AT_FDCWD, path.string(), flags, mode);
  if (!fd.valid()) throw_os_error("open", path, err, __FILE__, __LINE__);
  return std::move(fd);
}

Mapping::Mapping(int fd, std::size_t size, bool writable, const std::filesystem::path& path) {
  if (size == 0) return;
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) TT_OS_ERROR("mmap", path);
  data_ = data;
  size_ = size;
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

void* Mapping::release() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

void fsync_or_throw(int fd, const std::filesystem::path& path) {
  if (::fsync(fd) != 0) TT_OS_ERROR("fsync", path);
}

void fsync_directory(const std::filesystem::path& dir) {
  const FileDescriptor fd = open_path(dir, O_RDONLY | O_DIRECTORY);
  fsync_or_throw(fd.get(), dir);
}

void start_writeback(int fd, std::uint64_t offset, std::uint64_t n) noexcept {
  (void)::sync_file_range(fd, static_cast<off64_t>(offset), static_cast<off64_t>(n), SYNC_FILE_RANGE_WRITE);
}

namespace {

constexpr std::size_t kMaxSyncers = 16;

// Runs fn(i) for every i < count on up to `max_threads` threads (the caller's among them); the first
// exception is rethrown once all have stopped.
template <class Fn>
void parallel_for(std::size_t count, std::size_t max_threads, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&] {
    for (std::size_t i; !failed.load() && (i = next.fetch_add(1)) < count;) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true);
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (std::size_t t = 1; t < std::min(max_threads, count); ++t) helpers.emplace_back(work);
    work();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void fsync_all(const std::vector<std::filesystem::path>& paths) {
  parallel_for(paths.size(), kMaxSyncers, [&](std::size_t i) {
    const FileDescriptor fd = open_path(paths[i], O_RDONLY);
    fsync_or_throw(fd.get(), paths[i]);
  });
}

namespace {

constexpr std::size_t kFilesPerRemover = 64;
constexpr std::size_t kMaxRemovers = 16;

// Every non-directory entry under `dir` (links are not followed, `dir` itself included: what an
// exchange left at a temporary name may be a link, and only the link is removed then).
std::vector<std::filesystem::path> files_under(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(dir, ec))) return files;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) files.push_back(it->path());
  }
  return files;
}

}  // namespace

void remove_tree(const std::filesystem::path& dir) noexcept {
  try {
    const std::vector<std::filesystem::path> files = files_under(dir);
    const std::size_t removers = std::clamp<std::size_t>(files.size() / kFilesPerRemover, 1, kMaxRemovers);
    parallel_for(files.size(), removers, [&](std::size_t i) { ::unlink(files[i].c_str()); });
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  } catch (...) {
    // Out of memory or threads: whatever is left stays behind, as with any failed removal.
  }
}

void write_all_at(int fd, const void* data, std::size_t n, std::uint64_t offset, const std::filesystem::path& path) {
  const auto* bytes = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t written = ::pwrite(fd, bytes, n, static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      TT_OS_ERROR("pwrite", path);
    }
    bytes += written;
    n -= static_cast<std::size_t>(written);
    offset += static_cast<std::uint64_t>(written);
  }
}

void read_all(int fd, void* data, std::size_t n, const std::filesystem::path& path, std::uint64_t offset) {
  auto* bytes = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, bytes + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      TT_OS_ERROR("read", path);
    }
    if (got == 0) {
      throw CorruptData(fmt::format("'{}' ended at byte {} of {}", path.string(), offset + done, offset + n));
    }
    done += static_cast<std::size_t>(got);
  }
}

}  // namespace tensortree::detail
