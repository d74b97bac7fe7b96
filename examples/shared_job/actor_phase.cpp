#include "actor_phase.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace shared_job {

namespace {

constexpr std::size_t kBytes = sizeof(std::atomic<std::uint32_t>);

void* map_word(int fd) {
  void* mapping = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) throw std::runtime_error("mmap of an actor's phase word failed");
  return mapping;
}

}  // namespace

ActorPhase ActorPhase::create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::ftruncate(fd, kBytes) != 0) throw std::runtime_error("cannot create " + path.string());
  return ActorPhase(map_word(fd));  // a new file reads as zeros: Phase::Starting
}

bool ActorPhase::try_open(const std::filesystem::path& path, ActorPhase& out) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat info {};
  if (::fstat(fd, &info) != 0 || static_cast<std::size_t>(info.st_size) < kBytes) {
    ::close(fd);  // created but not yet sized
    return false;
  }
  out = ActorPhase(map_word(fd));
  return true;
}

ActorPhase::ActorPhase(ActorPhase&& other) noexcept : mapping_(std::exchange(other.mapping_, nullptr)) {}

ActorPhase& ActorPhase::operator=(ActorPhase&& other) noexcept {
  if (this != &other) {
    if (mapping_ != nullptr) ::munmap(mapping_, kBytes);
    mapping_ = std::exchange(other.mapping_, nullptr);
  }
  return *this;
}

ActorPhase::~ActorPhase() {
  if (mapping_ != nullptr) ::munmap(mapping_, kBytes);
}

std::filesystem::path phase_path(const std::string& name, int id) {
  return std::filesystem::path("/dev/shm") / (name + "_actor" + std::to_string(id));
}

}  // namespace shared_job
