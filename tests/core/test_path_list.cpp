#include <catch2/catch.hpp>

#include <algorithm>
#include <compare>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/path.hpp"
#include "tensortree/path_list.hpp"

using namespace tensortree;

namespace {

// Paths that order differently key by key than as joined strings, with dots and empty keys inside keys.
std::vector<Path> awkward_paths() {
  return {{"next", "obs"}, {"next"}, {"next.obs"}, {"", "x"}, {"x", ""}, {""}, {"a", "b", "c", "d"},
          {"a", "bc"}, {"ab", "c"}, {std::string("nul\0key", 7)}, {"next", "obs", "pixels"}};
}

}  // namespace

TEST_CASE("a PathList gives back every path it was given, key by key") {
  const std::vector<Path> paths = awkward_paths();
  PathList list;
  CHECK(list.empty());
  for (const Path& path : paths) list.push_back(path);
  REQUIRE(list.size() == paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    INFO("path " << i);
    const PathView view = list[i];
    CHECK(view == paths[i]);
    CHECK(view.to_path() == paths[i]);
    REQUIRE(view.size() == paths[i].size());
    for (std::size_t k = 0; k < view.size(); ++k) CHECK(view[k] == paths[i][k]);
    CHECK(std::vector<std::string_view>(view.begin(), view.end()).size() == paths[i].size());
    CHECK(path_str(view) == path_str(paths[i]));
    CHECK(PathRef(view).path() == paths[i]);
  }
}

TEST_CASE("a PathList holds the empty path, and an ancestor is a prefix view") {
  PathList list;
  list.push_back(Path{});
  list.push_back(Path{"a", "b", "c"});
  list.push_back(std::vector<std::string_view>{"d"});
  REQUIRE(list.size() == 3);
  CHECK(list[0].empty());
  CHECK(list[0] == Path{});
  CHECK(list[1].first(2) == Path{"a", "b"});
  CHECK(list[1].first(0).empty());
  CHECK(list[1].back() == "c");
  CHECK(list[2] == Path{"d"});
}

TEST_CASE("PathView orders and compares exactly as Path does") {
  const std::vector<Path> paths = awkward_paths();
  PathList list;
  for (const Path& path : paths) list.push_back(path);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    for (std::size_t j = 0; j < paths.size(); ++j) {
      INFO(path_str(paths[i]) << " vs " << path_str(paths[j]));
      CHECK((list[i] <=> list[j]) == (paths[i] <=> paths[j]));
      CHECK((list[i] <=> paths[j]) == (paths[i] <=> paths[j]));
      CHECK((paths[i] == list[j]) == (i == j));
    }
  }
}

TEST_CASE("two PathLists are equal exactly when they hold the same paths in the same order") {
  PathList a, b, c;
  for (const Path& path : awkward_paths()) {
    a.push_back(path);
    b.push_back(path);
  }
  CHECK(a == b);
  b.shrink_to_fit();
  CHECK(a == b);
  c.reserve(100, 100, 1000);
  CHECK(c == PathList());
  // The same bytes split into other keys are other paths.
  PathList ab, a_b;
  ab.push_back(Path{"ab"});
  a_b.push_back(Path{"a", "b"});
  CHECK_FALSE(ab == a_b);
}
