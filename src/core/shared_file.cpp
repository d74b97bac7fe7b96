#include "core/shared_file.hpp"

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

namespace tensortree::detail {

namespace {

std::string path_of(const SharedFileAddress& address) {
  return "/proc/" + std::to_string(address.pid) + "/fd/" + std::to_string(address.fd);
}

}  // namespace

SharedFileAddress address_of(const Storage& storage) {
  if (storage.kind() != MemoryKind::SharedHost || storage.shared_fd() < 0) {
    throw InvalidArgument("address_of: the storage is not shared host memory");
  }
  struct stat info {};
  if (::fstat(storage.shared_fd(), &info) != 0) {
    throw BackendError(fmt::format("fstat of a shared memory file failed: {}", std::strerror(errno)));
  }
  return {static_cast<std::int32_t>(::getpid()), storage.shared_fd(), static_cast<std::uint64_t>(info.st_ino)};
}

StoragePtr map_peer_file(const SharedFileAddress& address, std::uint64_t nbytes) {
  const std::string path = path_of(address);
  const FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) throw BackendError(fmt::format("opening a peer's shared memory {} failed: {}", path,
                                                     std::strerror(errno)));
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) throw BackendError(fmt::format("fstat of {} failed: {}", path,
                                                                      std::strerror(errno)));
  if (static_cast<std::uint64_t>(info.st_ino) != address.inode) {
    throw CorruptData(fmt::format("{} is inode {}, not the shared memory announced (inode {})", path, info.st_ino,
                                  address.inode));
  }
  const int seals = ::fcntl(file.get(), F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    throw CorruptData(fmt::format("{} is not sealed against shrinking: its owner could cut it under the mapping",
                                  path));
  }
  if (static_cast<std::uint64_t>(info.st_size) < nbytes) {
    throw CorruptData(fmt::format("{} holds {} bytes, fewer than the {} announced", path, info.st_size, nbytes));
  }
  const std::size_t mapped = nbytes == 0 ? 1 : static_cast<std::size_t>(nbytes);
  void* data = ::mmap(nullptr, mapped, PROT_READ, MAP_SHARED, file.get(), 0);
  if (data == MAP_FAILED) throw BackendError(fmt::format("mmap of {} bytes of {} failed: {}", mapped, path,
                                                         std::strerror(errno)));
  return Storage::adopt(data, static_cast<std::size_t>(nbytes), Device::cpu(),
                        [mapped](void* p) { ::munmap(p, mapped); });
}

SharedFileAddress probe_address() {
  static const StoragePtr probe = Storage::allocate_shared(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
  return address_of(*probe);
}

bool can_map(const SharedFileAddress& address) noexcept {
  try {
    return map_peer_file(address, 1) != nullptr;
  } catch (...) {
    return false;
  }
}

}  // namespace tensortree::detail
