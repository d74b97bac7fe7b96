// The directory ReplayBuffer::create works in: made with the parents it lacked, and undone unless
// the create succeeds, so that a failed create (capacity 0, say) leaves nothing behind: the files
// it wrote are removed, then the directories it made, each only while empty.
#pragma once

#include <filesystem>
#include <vector>

namespace tensortree::detail {

class CreatedDirectory {
 public:
  // InvalidArgument when `dir` already holds a replay buffer or anything but nothing.
  explicit CreatedDirectory(std::filesystem::path dir);
  CreatedDirectory(const CreatedDirectory&) = delete;
  CreatedDirectory& operator=(const CreatedDirectory&) = delete;
  ~CreatedDirectory();

  // `file` was written by this create: removed with the rest unless kept.
  void wrote(std::filesystem::path file) { files_.push_back(std::move(file)); }
  // The create succeeded: everything stays.
  void keep() { kept_ = true; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path outermost_made_;  // empty when `dir` existed
  std::vector<std::filesystem::path> files_;
  bool kept_ = false;
};

}  // namespace tensortree::detail
