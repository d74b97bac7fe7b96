#include "rl/replay/created_directory.hpp"

#include "core/text_format.hpp"
#include "rl/replay/control_block.hpp"
#include "rl/replay/fs_errors.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace fs = std::filesystem;

CreatedDirectory::CreatedDirectory(fs::path dir) : dir_(dir.lexically_normal()) {
  if (!dir_.has_filename()) dir_ = dir_.parent_path();  // "a/b/" is "a/b": one name per directory
  with_typed_fs_errors("ReplayBuffer::create", [&] {
    for (fs::path p = dir_; !p.empty() && !fs::exists(p); p = p.parent_path()) {
      outermost_made_ = p;
      if (p == p.parent_path()) break;
    }
    fs::create_directories(dir_);
    if (fs::exists(dir_ / kControlFileName)) {
      throw InvalidArgument(fmt::format("ReplayBuffer::create: '{}' already holds a replay buffer", dir_.string()));
    }
    if (!fs::is_empty(dir_)) {
      throw InvalidArgument(fmt::format(
          "ReplayBuffer::create: '{}' is not empty; a buffer needs a directory of its own", dir_.string()));
    }
  });
}

CreatedDirectory::~CreatedDirectory() {
  if (kept_) return;
  std::error_code ignored;
  for (const fs::path& file : files_) fs::remove(file, ignored);
  if (outermost_made_.empty()) return;
  // Innermost first; a directory someone else has filled meanwhile stays, and so do its parents.
  for (fs::path p = dir_; fs::remove(p, ignored) && p != outermost_made_; p = p.parent_path()) {
  }
}

}  // namespace tensortree::detail
