#include "tensortree/path.hpp"

namespace tensortree {

Path parse_path(std::string_view text, char sep) {
  Path path;
  if (text.empty()) return path;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    path.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return path;
    start = end + 1;
  }
}

namespace {

template <class Keys>
std::string joined(const Keys& path, char sep) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i) out += sep;
    out += path[i];
  }
  return out;
}

}  // namespace

std::string path_str(const Path& path, char sep) { return joined(path, sep); }
std::string path_str(PathView path, char sep) { return joined(path, sep); }

Path PathView::to_path() const {
  Path path;
  path.reserve(size_);
  for (const std::string_view key : *this) path.emplace_back(key);
  return path;
}

}  // namespace tensortree
