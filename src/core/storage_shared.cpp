// Host memory that other processes can map: an anonymous memfd, mapped MAP_SHARED. The storage owns
// both the mapping and the descriptor and releases them together.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/file_descriptor.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/storage.hpp"

namespace tensortree {

namespace {

[[noreturn]] void throw_errno(const std::string& call) {
  throw BackendError(fmt::format("{} failed: {}", call, std::strerror(errno)));
}

}  // namespace

std::shared_ptr<Storage> Storage::map_shared(int fd) {
  detail::FileDescriptor own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (own.get() < 0) throw_errno(fmt::format("fcntl(F_DUPFD_CLOEXEC) of shared memory fd {}", fd));
  struct stat info {};
  if (::fstat(own.get(), &info) != 0) throw_errno(fmt::format("fstat of shared memory fd {}", fd));
  const auto nbytes = static_cast<std::size_t>(info.st_size);
  // mmap refuses a length of 0; an empty buffer still gets a page so that data() is a real address.
  const std::size_t mapped = nbytes == 0 ? 1 : nbytes;
  void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, own.get(), 0);
  if (data == MAP_FAILED) throw_errno(fmt::format("mmap of {} shared bytes", mapped));
  const int kept = own.release();
  std::shared_ptr<Storage> storage(new Storage(static_cast<std::byte*>(data), nbytes, Device::cpu(),
                                               MemoryKind::Foreign, [mapped, kept](void* p) {
                                                 ::munmap(p, mapped);
                                                 ::close(kept);
                                               }));
  storage->shared_fd_ = kept;
  return storage;
}

std::shared_ptr<Storage> Storage::allocate_shared(std::size_t nbytes) {
  detail::FileDescriptor fd(::memfd_create("tensortree-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd.get() < 0) throw_errno("memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(nbytes)) != 0) {
    throw_errno(fmt::format("ftruncate of a memfd to {} bytes", nbytes));
  }
  // A peer that maps the file reads all of it: nobody may shrink it under the mapping (SIGBUS).
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    throw_errno(fmt::format("sealing a memfd of {} bytes", nbytes));
  }
  std::shared_ptr<Storage> storage = map_shared(fd.get());  // maps a duplicate; the guard closes the original
  storage->kind_ = MemoryKind::SharedHost;
  return storage;
}

}  // namespace tensortree
