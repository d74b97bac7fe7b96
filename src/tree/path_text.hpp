// Paths in src/tree: how tree methods name them in messages, and small checks on them.
#pragma once

#include <cstddef>
#include <string>

#include "tensortree/error.hpp"
#include "tensortree/path.hpp"

namespace tensortree::detail {

inline std::string quoted(const Path& path) {
  if (path.empty()) return "the root";
  std::string text = "'";
  text += path_str(path);
  text += '\'';
  return text;
}

// {"next", "obs"}: unambiguous where keys may contain the separator.
inline std::string listed(const Path& path) {
  std::string text = "{";
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i) text += ", ";
    text += '"';
    text += path[i];
    text += '"';
  }
  return text + "}";
}

inline Path child_path(Path path, const std::string& key) {
  path.push_back(key);
  return path;
}

inline void check_not_root(const Path& path, const char* operation) {
  if (path.empty()) {
    throw InvalidArgument(std::string(operation) + " needs a key; the empty path names the tree itself");
  }
}

inline Path prefix_of(const Path& path, std::size_t length) {
  return Path(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(length));
}

}  // namespace tensortree::detail
