// Key paths into a TensorTree: {"next", "obs"}, also written "next.obs".
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/export.hpp"

namespace tensortree {

using Path = std::vector<std::string>;

// Splits "next.obs" at `sep`; an empty string is the empty path (the root). Empty keys between
// separators are kept ("a..b" is {"a", "", "b"}), so any path written by path_str parses back
// as long as no key contains `sep`.
TT_API Path parse_path(std::string_view text, char sep = '.');
// Joins the keys with `sep`: "next.obs".
TT_API std::string path_str(const Path& path, char sep = '.');

// Accepts every way a caller names a path: "next.obs", std::string, {"next", "obs"}, a Path.
class PathRef {
 public:
  PathRef(const char* dotted) : path_(parse_path(dotted)) {}
  PathRef(std::string_view dotted) : path_(parse_path(dotted)) {}
  PathRef(const std::string& dotted) : path_(parse_path(dotted)) {}
  PathRef(std::initializer_list<std::string> keys) : path_(keys) {}
  PathRef(Path path) : path_(std::move(path)) {}

  const Path& path() const { return path_; }
  operator const Path&() const { return path_; }

 private:
  Path path_;
};

}  // namespace tensortree
