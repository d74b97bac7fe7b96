// Paths in src/tree: how tree methods name them in messages, and small checks on them.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/path.hpp"

namespace tensortree::detail {

inline std::string quoted(const Path& path) {
  if (path.empty()) return "the root";
  return fmt::format("'{}'", path_str(path));
}

// {"next", "obs"}: unambiguous where keys may contain the separator.
inline std::string listed(const Path& path) {
  fmt::memory_buffer text;
  fmt::format_to(std::back_inserter(text), "{{");
  for (std::size_t i = 0; i < path.size(); ++i) {
    fmt::format_to(std::back_inserter(text), "{}\"{}\"", i ? ", " : "", path[i]);
  }
  fmt::format_to(std::back_inserter(text), "}}");
  return fmt::to_string(text);
}

inline Path child_path(Path path, const std::string& key) {
  path.push_back(key);
  return path;
}

inline void check_not_root(const Path& path, const char* operation) {
  if (path.empty()) {
    throw InvalidArgument(fmt::format("{} needs a key; the empty path names the tree itself", operation));
  }
}

inline Path prefix_of(const Path& path, std::size_t length) {
  return Path(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(length));
}

}  // namespace tensortree::detail
