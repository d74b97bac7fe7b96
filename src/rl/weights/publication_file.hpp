// The file behind a weight publication: where a name lives, how a new one appears whole (written
// under a temporary name, then linked under its own), how readers wait for it, and its shared mappings.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/file_descriptor.hpp"

namespace tensortree::rl {

// A plain name lives at /dev/shm/tensortree-weights-<name> (rl/shared_memory_name.hpp, the rule
// replay buffers follow too); a name holding a '/' is a file path. InvalidArgument for an empty
// name, "." or "..".
std::string publication_path(const std::string& name);

// A shared mapping of [offset, offset + bytes) of a file, unmapped when its last owner goes.
class Mapping {
 public:
  static std::shared_ptr<Mapping> map(int fd, std::uint64_t offset, std::uint64_t bytes, bool writable,
                                      const std::string& path);
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
  std::byte* data() const { return data_; }
  std::uint64_t size() const { return bytes_; }

 private:
  Mapping(std::byte* data, std::uint64_t bytes) : data_(data), bytes_(bytes) {}
  std::byte* data_;
  std::uint64_t bytes_;
};

struct OpenFile {
  detail::FileDescriptor fd;
  std::uint64_t bytes = 0;
};

// The existing publication at `path`, opened read-write; nullopt when there is none.
std::optional<OpenFile> open_publication(const std::string& path);
// open_publication() retried until the file exists, at most `timeout` (Timeout naming the path).
OpenFile wait_for_publication(const std::string& path, std::chrono::milliseconds timeout);
// `bytes` from `offset`, copied out (what is validated is then what is used). CorruptData when the
// file is shorter.
std::vector<std::byte> read_bytes(int fd, std::uint64_t offset, std::uint64_t bytes, const std::string& path);
// Marks `fd` as its publication's one publisher: an exclusive, non-blocking flock, which the kernel
// drops when the process dies. InvalidArgument when another publisher holds it.
void lock_as_publisher(int fd, const std::string& path);

// A new publication of `bytes` zero bytes under a temporary name beside `path`, locked as its
// publisher's; commit() gives it its name (InvalidArgument when the name was taken meanwhile).
// Removed when dropped uncommitted.
class NewPublicationFile {
 public:
  NewPublicationFile(std::string path, std::uint64_t bytes);
  NewPublicationFile(const NewPublicationFile&) = delete;
  NewPublicationFile& operator=(const NewPublicationFile&) = delete;
  ~NewPublicationFile();
  int fd() const { return file_.fd.get(); }
  // Links the file under its path and hands over the descriptor.
  OpenFile commit();

 private:
  std::string path_;
  std::string temporary_;
  OpenFile file_;
  bool committed_ = false;
};

}  // namespace tensortree::rl
