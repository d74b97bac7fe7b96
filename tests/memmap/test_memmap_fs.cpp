// The file-system helpers behind saves: removing a tree and syncing many files, with several threads.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "memmap/memmap_fs.hpp"
#include "memmap_test_support.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;
using namespace memmap_test;

TEST_CASE("remove_tree removes hundreds of files in nested directories and does not follow links") {
  const ScratchDir scratch;
  const fs::path tree = scratch / "tree";
  const fs::path outside = scratch / "outside";
  fs::create_directories(outside);
  write_text(outside / "keep.txt", "still here");
  for (int d = 0; d < 7; ++d) {
    const fs::path dir = tree / numbered("d", d) / "inner";
    fs::create_directories(dir);
    for (int f = 0; f < 60; ++f) write_text(dir / numbered("f", f), std::string(static_cast<std::size_t>(f), 'x'));
  }
  fs::create_directory_symlink(outside, tree / "d0" / "link_to_outside");
  fs::create_symlink(outside / "keep.txt", tree / "file_link");
  REQUIRE(std::distance(fs::recursive_directory_iterator(tree), fs::recursive_directory_iterator()) > 420);

  detail::remove_tree(tree);
  CHECK_FALSE(fs::exists(fs::symlink_status(tree)));
  CHECK(read_text(outside / "keep.txt") == "still here");
}

TEST_CASE("remove_tree of a link to a directory removes the link, not what it points to") {
  const ScratchDir scratch;
  const fs::path target = scratch / "target";
  fs::create_directories(target / "inner");
  for (int f = 0; f < 200; ++f) write_text(target / "inner" / numbered("f", f), "data");
  fs::create_directory_symlink(target, scratch / "link");

  detail::remove_tree(scratch / "link");
  CHECK_FALSE(fs::exists(fs::symlink_status(scratch / "link")));
  CHECK(std::distance(fs::directory_iterator(target / "inner"), fs::directory_iterator()) == 200);
}

TEST_CASE("remove_tree of a missing directory does nothing and does not throw") {
  const ScratchDir scratch;
  detail::remove_tree(scratch / "absent");
  CHECK(fs::exists(scratch.path()));
}

TEST_CASE("fsync_all syncs files and directories and names the first path that fails") {
  const ScratchDir scratch;
  std::vector<fs::path> paths = {scratch.path()};
  for (int f = 0; f < 40; ++f) {
    paths.push_back(scratch / numbered("f", f));
    write_text(paths.back(), "data");
  }
  CHECK_NOTHROW(detail::fsync_all(paths));
  CHECK_NOTHROW(detail::fsync_all({}));
  paths.insert(paths.begin() + 20, scratch / "absent");
  try {
    detail::fsync_all(paths);
    FAIL("no error for a missing file");
  } catch (const BackendError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("absent"));
  }
}
