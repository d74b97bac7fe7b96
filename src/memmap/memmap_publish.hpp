// Where a memmap save writes and how it publishes: the target directory's checks, the temporary
// sibling directory the tree is written into, and the rename (or atomic exchange) that publishes
// it, so that a reader or a crash only ever sees a whole old tree or a whole new one.
#pragma once

#include <filesystem>

#include "memmap/memmap_fs.hpp"
#include "tensortree/memmap.hpp"

namespace tensortree::detail {

// `dir` made absolute and normal, without a trailing separator.
std::filesystem::path normalized_target(const std::filesystem::path& dir);
// InvalidArgument (or BackendError) unless `policy` allows saving over what is at `target` now.
void check_target(const std::filesystem::path& target, MemmapOverwrite policy);
// A fresh temporary directory name beside `target`, naming this host and process.
std::filesystem::path temp_sibling(const std::filesystem::path& target);
// Temporary trees left by saves that were killed: only those of dead processes on this host.
void remove_stale_temps(const std::filesystem::path& target);
// Moves the finished tree at `temp` to `target`. Afterwards `temp` holds the previous tree, if any.
void publish(const std::filesystem::path& temp, const std::filesystem::path& target, MemmapOverwrite policy);

// Removes the temporary directory however the save ends: after a failure it holds the partial
// tree, after an exchange the previous tree, after a plain rename nothing.
class TempDirGuard {
 public:
  explicit TempDirGuard(std::filesystem::path path) : path_(std::move(path)) {}
  TempDirGuard(const TempDirGuard&) = delete;
  TempDirGuard& operator=(const TempDirGuard&) = delete;
  ~TempDirGuard() { remove_tree(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tensortree::detail
