#include "rl/weights/publication_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/shared_memory_name.hpp"
#include "tensortree/error.hpp"

namespace tensortree::rl {

namespace {

[[noreturn]] void failed(const std::string& what, const std::string& path) {
  throw BackendError(fmt::format("{} of weight publication {} failed: {}", what, path, std::strerror(errno)));
}

std::uint64_t size_of(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) failed("fstat", path);
  return static_cast<std::uint64_t>(info.st_size);
}

}  // namespace

std::string publication_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  return shared_memory_path(kWeightsKind, name, "weight publication name").string();
}

std::shared_ptr<Mapping> Mapping::map(int fd, std::uint64_t offset, std::uint64_t bytes, bool writable,
                                      const std::string& path) {
  // mmap refuses a length of 0; an empty region still gets a page so that data() is an address.
  const std::uint64_t mapped = bytes == 0 ? 1 : bytes;
  void* data = ::mmap(nullptr, static_cast<std::size_t>(mapped), writable ? PROT_READ | PROT_WRITE : PROT_READ,
                      MAP_SHARED, fd, static_cast<off_t>(offset));
  if (data == MAP_FAILED) failed(fmt::format("mmap of {} bytes at {}", mapped, offset), path);
  return std::shared_ptr<Mapping>(new Mapping(static_cast<std::byte*>(data), mapped));
}

Mapping::~Mapping() { ::munmap(data_, static_cast<std::size_t>(bytes_)); }

std::optional<OpenFile> open_publication(const std::string& path) {
  detail::FileDescriptor fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::nullopt;
    failed("open", path);
  }
  const std::uint64_t bytes = size_of(fd.get(), path);
  return OpenFile{std::move(fd), bytes};
}

OpenFile wait_for_publication(const std::string& path, std::chrono::milliseconds timeout) {
  std::optional<OpenFile> file;
  detail::wait_bounded([&] { return (file = open_publication(path)).has_value(); }, timeout, [&] {
    return Timeout(fmt::format("weight publication {} did not appear within {} ms (nothing published yet?)", path,
                               timeout.count()));
  });
  return std::move(*file);
}

std::vector<std::byte> read_bytes(int fd, std::uint64_t offset, std::uint64_t bytes, const std::string& path) {
  std::vector<std::byte> out(static_cast<std::size_t>(bytes));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failed("pread", path);
    if (n == 0) {
      throw CorruptData(fmt::format("weight publication {}: the file ends {} bytes into the {} bytes at offset {} "
                                    "(truncated)",
                                    path, done, bytes, offset));
    }
    done += static_cast<std::size_t>(n);
  }
  return out;
}

void lock_as_publisher(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
  if (errno == EWOULDBLOCK) {
    throw InvalidArgument(fmt::format("weight publication {} already has a live publisher", path));
  }
  failed("flock", path);
}

NewPublicationFile::NewPublicationFile(std::string path, std::uint64_t bytes) : path_(std::move(path)) {
  temporary_ = fmt::format("{}.new-{}-{}", path_, ::getpid(), std::random_device{}());
  file_.fd = detail::FileDescriptor(::open(temporary_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!file_.fd.valid()) failed(fmt::format("creating {} for the first publish", temporary_), path_);
  if (::ftruncate(file_.fd.get(), static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    ::unlink(temporary_.c_str());
    errno = error;
    failed(fmt::format("sizing to {} bytes", bytes), path_);
  }
  file_.bytes = bytes;
  lock_as_publisher(file_.fd.get(), path_);
}

NewPublicationFile::~NewPublicationFile() {
  if (!committed_) ::unlink(temporary_.c_str());
}

OpenFile NewPublicationFile::commit() {
  // A link, not a rename: it fails rather than replace a publication another publisher made meanwhile.
  if (::link(temporary_.c_str(), path_.c_str()) != 0) {
    if (errno == EEXIST) {
      throw InvalidArgument(fmt::format("weight publication {} appeared while this publisher created it: another "
                                        "publisher owns the name",
                                        path_));
    }
    failed(fmt::format("linking {} into place", temporary_), path_);
  }
  committed_ = true;
  ::unlink(temporary_.c_str());
  return std::move(file_);
}

}  // namespace tensortree::rl
