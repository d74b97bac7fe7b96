// Many paths in one key arena: what a schema keeps for its leaves.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/export.hpp"
#include "tensortree/path.hpp"

namespace tensortree {

// Paths stored flat: every key's bytes back to back in one string, the offsets where the keys end,
// and where each path's keys start. A vector of Paths costs an allocation per path (and per key
// beyond the short-string size) and scatters the keys over the heap; here a list sized by
// reserve() allocates nothing per path, and comparing two paths reads contiguous bytes. The layout
// is canonical, so two lists are equal exactly when they hold the same paths in the same order.
class PathList {
 public:
  // Room for `paths` paths holding `keys` keys and `key_bytes` bytes of keys in all.
  void reserve(std::size_t paths, std::size_t keys, std::size_t key_bytes) {
    path_starts_.reserve(paths + 1);
    key_bounds_.reserve(keys + 1);
    bytes_.reserve(key_bytes);
  }
  // Gives back what reserve() set aside beyond what is held (when it was sized from above).
  void shrink_to_fit() {
    path_starts_.shrink_to_fit();
    key_bounds_.shrink_to_fit();
    bytes_.shrink_to_fit();
  }

  // Appends a path given as any range of keys (a Path, a PathView, a span of string_views).
  template <class Keys>
  void push_back(const Keys& keys) {
    start();
    for (const auto& key : keys) {
      const std::string_view bytes(key);
      bytes_.append(bytes);
      key_bounds_.push_back(bytes_.size());
    }
    path_starts_.push_back(key_bounds_.size() - 1);
  }

  std::size_t size() const { return path_starts_.empty() ? 0 : path_starts_.size() - 1; }
  bool empty() const { return size() == 0; }
  // Valid while the list lives and is not appended to.
  PathView operator[](std::size_t i) const {
    return {bytes_.data(), key_bounds_.data() + path_starts_[i], path_starts_[i + 1] - path_starts_[i]};
  }

  friend bool operator==(const PathList&, const PathList&) = default;

 private:
  // The leading zeros are written with the first path, so that an empty list allocates nothing.
  void start() {
    if (path_starts_.empty()) {
      path_starts_.push_back(0);
      key_bounds_.push_back(0);
    }
  }

  std::string bytes_;
  std::vector<std::size_t> key_bounds_;   // key k is bytes_[key_bounds_[k], key_bounds_[k + 1])
  std::vector<std::size_t> path_starts_;  // path i is keys [path_starts_[i], path_starts_[i + 1])
};

}  // namespace tensortree
