#include "rl/shared_memory_name.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::rl {

std::filesystem::path shared_memory_path(std::string_view kind, std::string_view name, std::string_view who) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos) {
    throw InvalidArgument(fmt::format("{}: '{}' is not a plain file name (a shared memory name lives at "
                                      "/dev/shm/tensortree-{}-<name>)", who, name, kind));
  }
  return std::filesystem::path("/dev/shm") / fmt::format("tensortree-{}-{}", kind, name);
}

}  // namespace tensortree::rl
