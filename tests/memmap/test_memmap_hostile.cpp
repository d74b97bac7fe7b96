// Hostile memmap directories: truncated or oversized files, lying meta.json files, missing files and
// symbolic links. Each is a typed error naming the file, never a crash (these run under ASan/UBSan),
// and the same error whether the tree is mapped or read into one block (MemmapMode::Copy).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include "memmap_test_support.hpp"

using namespace tensortree;
using namespace memmap_test;

namespace {

const std::string kType = "\"_type\": \"<class 'tensordict._td.TensorDict'>\"";

std::string leaf_entry(const std::string& shape, const std::string& dtype = "torch.float32") {
  std::string out = "{\"device\": \"cpu\", \"shape\": ";
  out += shape;
  out += ", \"dtype\": \"";
  out += dtype;
  out += "\", \"is_nested\": false}";
  return out;
}

// A good tree: root {x: float32 [4, 2], next: {y: int64 [4]}}, batch [4].
struct GoodTree {
  ScratchDir scratch;
  fs::path root = scratch / "t";

  GoodTree() {
    TensorTree tree(Shape{4});
    tree.set(Path{"x"}, patterned({4, 2}, DType::Float32, 1));
    tree.set(Path{"next", "y"}, patterned({4}, DType::Int64, 2));
    tree.memmap_(root);
  }

  void root_meta(const std::string& entries, const std::string& shape = "[4]") const {
    std::string text = "{";
    text += entries;
    if (!entries.empty()) text += ", ";
    text += "\"shape\": ";
    text += shape;
    text += ", \"device\": \"cpu\", ";
    text += kType;
    text += '}';
    write_text(root / "meta.json", text);
  }
};

template <class Error>
void require_error_once(const fs::path& root, const std::vector<std::string>& fragments,
                        const LoadMemmapOptions& options) {
  try {
    (void)TensorTree::load_memmap(root, options);
    FAIL("load_memmap accepted a hostile tree");
  } catch (const Error& e) {
    const std::string message = e.what();
    INFO(message);
    for (const std::string& fragment : fragments) CHECK(message.find(fragment) != std::string::npos);
  }
}

// The same error from the mapped load and, for a read-only one, from the load into one block.
template <class Error>
void require_error(const fs::path& root, const std::vector<std::string>& fragments, const LoadMemmapOptions& options = {}) {
  require_error_once<Error>(root, fragments, options);
  if (options.mode == MemmapMode::ReadOnly) {
    LoadMemmapOptions copied = options;
    copied.mode = MemmapMode::Copy;
    INFO("MemmapMode::Copy");
    require_error_once<Error>(root, fragments, copied);
  }
}

}  // namespace

TEST_CASE("a truncated or oversized .memmap file is CorruptData naming the file and both sizes") {
  const GoodTree good;
  fs::resize_file(good.root / "x.memmap", 31);
  require_error<CorruptData>(good.root, {"x.memmap", "31 bytes", "expected 32", "truncated"});
  fs::resize_file(good.root / "x.memmap", 33);
  require_error<CorruptData>(good.root, {"x.memmap", "33 bytes", "expected 32", "too long"});
  fs::resize_file(good.root / "x.memmap", 0);
  require_error<CorruptData>(good.root, {"x.memmap", "0 bytes"});
  // Listing reports the problem instead of throwing, and reads no data.
  const MemmapListing listing = list_memmap(good.root);
  REQUIRE(listing.problems.size() == 1);
  CHECK(listing.problems[0].find("x.memmap") != std::string::npos);
  REQUIRE(listing.entries.size() == 4);  // root, x, next, next.y
  CHECK(listing.entries[1].path == Path{"x"});
  CHECK(listing.entries[1].file_bytes == 0);
  CHECK(listing.entries[1].nbytes == 32);
  CHECK(listing.entries[2].is_node);
}

TEST_CASE("missing files are CorruptData naming them") {
  SECTION("a leaf file") {
    const GoodTree good;
    fs::remove(good.root / "next" / "y.memmap");
    require_error<CorruptData>(good.root, {"y.memmap", "missing", "next.y"});
  }
  SECTION("a node's meta.json") {
    const GoodTree good;
    fs::remove(good.root / "next" / "meta.json");
    require_error<CorruptData>(good.root, {"next/meta.json", "missing"});
  }
  SECTION("a node's directory") {
    const GoodTree good;
    fs::remove_all(good.root / "next");
    require_error<CorruptData>(good.root, {"next", "missing"});
  }
  SECTION("the root's meta.json") {
    const GoodTree good;
    fs::remove(good.root / "meta.json");
    require_error<CorruptData>(good.root, {"meta.json", "missing"});
  }
  SECTION("the root itself is the caller's mistake") {
    const ScratchDir scratch;
    require_error<InvalidArgument>(scratch / "nothing", {"nothing"});
  }
}

TEST_CASE("meta.json with wrong shapes is CorruptData naming the file and the key") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[4, -2]", "negative"},
      {"[4, 2.5]", "integer"},
      {"[4, \"2\"]", "integer"},
      {"\"[4, 2]\"", "not a list"},
      {"[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]", "dimensions"},
      {"[4, 4611686018427387904, 4611686018427387904]", "overflows"},
      {"[4, 18446744073709551615]", "beyond int64"},
      {"[3, 2]", "batch size"},
      {"[4, 3]", "32"},  // the file is smaller than this shape says
      {"[4, true]", "integer"},
  };
  for (const auto& [shape, fragment] : cases) {
    INFO("shape " << shape);
    const GoodTree good;
    std::string entries = "\"x\": ";
    entries += leaf_entry(shape);
    entries += ", \"next\": {\"type\": \"TensorDict\"}";
    good.root_meta(entries);
    require_error<CorruptData>(good.root, {"x", fragment});
  }
}

TEST_CASE("meta.json with wrong dtypes or malformed JSON is CorruptData") {
  const std::vector<std::pair<std::string, std::string>> bad_entries = {
      {"\"x\": " + leaf_entry("[4, 2]", "torch.float33"), "float33"},
      {"\"x\": " + leaf_entry("[4, 2]", "float32"), "torch."},
      {"\"x\": {\"device\": \"cpu\", \"shape\": [4, 2], \"dtype\": 7, \"is_nested\": false}", "dtype"},
      {"\"x\": {\"device\": \"cpu\", \"shape\": [4, 2], \"is_nested\": false}", "dtype"},
      {"\"x\": {\"device\": \"cpu\", \"dtype\": \"torch.float32\"}", "shape"},
      {"\"x\": [1, 2]", "not an object"},
      {"\"x\": {\"device\": \"cpu\", \"shape\": [4, 2], \"dtype\": \"torch.float32\", \"is_nested\": 3}", "is_nested"},
      {"\"x\": " + leaf_entry("[4, 2]") + ", \"next\": {\"type\": 5}", "type"},
  };
  for (const auto& [entries, fragment] : bad_entries) {
    INFO(entries);
    const GoodTree good;
    good.root_meta(entries);
    require_error<CorruptData>(good.root, {"meta.json", fragment});
  }
  for (const std::string text : {"", "{", "[1, 2]", "{\"x\": 1", "null", "{\"x\": {}}", "\xff\xfe"}) {
    INFO("meta.json text '" << text << "'");
    const GoodTree good;
    write_text(good.root / "meta.json", text);
    require_error<CorruptData>(good.root, {"meta.json"});
  }
  {
    const GoodTree good;
    good.root_meta("\"x\": " + leaf_entry("[4, 2]") + ", \"next\": {\"type\": \"TensorDict\"}", "[-4]");
    require_error<CorruptData>(good.root, {"negative"});
  }
}

TEST_CASE("a child whose batch size does not extend its parent's is CorruptData") {
  const GoodTree good;
  std::string text = "{\"y\": ";
  text += leaf_entry("[5]", "torch.int64");
  text += ", \"shape\": [5], \"device\": \"cpu\", ";
  text += kType;
  text += '}';
  write_text(good.root / "next" / "meta.json", text);
  require_error<CorruptData>(good.root, {"next", "[5]", "[4]"});
}

TEST_CASE("TensorDict features without a TensorTree counterpart are NotSupported") {
  {
    const GoodTree good;
    good.root_meta("\"x\": {\"device\": \"cpu\", \"shape\": [4, 2], \"dtype\": \"torch.float32\", \"is_nested\": true}");
    require_error<NotSupported>(good.root, {"nested"});
  }
  {
    const GoodTree good;
    good.root_meta("\"x\": " + leaf_entry("[4, 2]") + ", \"next\": {\"type\": \"NonTensorData\"}");
    require_error<NotSupported>(good.root, {"NonTensorData"});
  }
  {
    const GoodTree good;
    write_text(good.root / "meta.json",
               "{\"shape\": [4], \"device\": \"cpu\", \"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\"}");
    require_error<NotSupported>(good.root, {"LazyStackedTensorDict"});
  }
}

TEST_CASE("symbolic links inside a tree are CorruptData, wherever they point") {
  SECTION("a leaf file linking outside the tree") {
    const GoodTree good;
    write_text(good.scratch / "outside.bin", std::string(32, 'z'));
    fs::remove(good.root / "x.memmap");
    fs::create_symlink(good.scratch / "outside.bin", good.root / "x.memmap");
    require_error<CorruptData>(good.root, {"x.memmap", "symbolic link"});
    require_error<CorruptData>(good.root, {"x.memmap", "symbolic link"}, {.mode = MemmapMode::ReadWrite});
  }
  SECTION("a node directory linking elsewhere") {
    const GoodTree good;
    fs::rename(good.root / "next", good.scratch / "elsewhere");
    fs::create_directory_symlink(good.scratch / "elsewhere", good.root / "next");
    require_error<CorruptData>(good.root, {"next", "symbolic link"});
  }
  SECTION("a meta.json link") {
    const GoodTree good;
    fs::rename(good.root / "next" / "meta.json", good.scratch / "meta.json");
    fs::create_symlink(good.scratch / "meta.json", good.root / "next" / "meta.json");
    require_error<CorruptData>(good.root, {"meta.json", "symbolic link"});
  }
  SECTION("a dangling link") {
    const GoodTree good;
    fs::remove(good.root / "x.memmap");
    fs::create_symlink("/nonexistent/file", good.root / "x.memmap");
    require_error<CorruptData>(good.root, {"x.memmap", "symbolic link"});
  }
}

TEST_CASE("entries of the wrong kind are CorruptData") {
  SECTION("a leaf file that is a directory") {
    const GoodTree good;
    fs::remove(good.root / "x.memmap");
    fs::create_directory(good.root / "x.memmap");
    require_error<CorruptData>(good.root, {"x.memmap"});
  }
  SECTION("a node directory that is a file") {
    const GoodTree good;
    fs::remove_all(good.root / "next");
    write_text(good.root / "next", "not a directory");
    require_error<CorruptData>(good.root, {"next", "not a directory"});
  }
  SECTION("meta.json that is a directory") {
    const GoodTree good;
    fs::remove(good.root / "next" / "meta.json");
    fs::create_directory(good.root / "next" / "meta.json");
    require_error<CorruptData>(good.root, {"meta.json"});
  }
}

TEST_CASE("a save refuses keys meta.json cannot hold and leaves nothing behind") {
  const ScratchDir scratch;
  for (const std::string key : {"shape", "device", "_type", "\xff\xfe"}) {
    INFO("key " << key);
    TensorTree tree(Shape{2});
    tree.set(Path{"ok"}, patterned({2}, DType::Int32, 1));
    tree.set(Path{"inner", key}, patterned({2}, DType::Int32, 2));
    CHECK_THROWS_AS(tree.memmap_(scratch / "t"), InvalidArgument);
    CHECK(fs::is_empty(scratch.path()));  // no target, no temporary directory
  }
}

namespace {

// Fails the test by SIGALRM instead of letting a blocked open or a quadratic parse run on.
struct Deadline {
  explicit Deadline(unsigned seconds) { ::alarm(seconds); }
  ~Deadline() { ::alarm(0); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
};

}  // namespace

TEST_CASE("a FIFO in place of meta.json or of a leaf file is CorruptData at once, never a blocked open") {
  const Deadline deadline(20);
  SECTION("meta.json") {
    const GoodTree good;
    fs::remove(good.root / "meta.json");
    REQUIRE(::mkfifo((good.root / "meta.json").c_str(), 0600) == 0);
    require_error<CorruptData>(good.root, {"meta.json", "not a regular file"});
  }
  SECTION("a leaf file, read-only and read-write") {
    const GoodTree good;
    fs::remove(good.root / "x.memmap");
    REQUIRE(::mkfifo((good.root / "x.memmap").c_str(), 0600) == 0);
    require_error<CorruptData>(good.root, {"x.memmap", "not a regular file"});
    require_error<CorruptData>(good.root, {"x.memmap", "not a regular file"},
                               LoadMemmapOptions{.mode = MemmapMode::ReadWrite});
  }
}

TEST_CASE("meta.json nested past the bound, or repeating a key, is CorruptData") {
  const Deadline deadline(20);
  const GoodTree good;
  SECTION("200 KB of nested arrays") {
    const std::size_t depth = 100'000;
    good.root_meta("\"x\": " + std::string(depth, '[') + std::string(depth, ']'));
    require_error<CorruptData>(good.root, {"meta.json", "nested deeper than 16"});
  }
  SECTION("a repeated key") {
    good.root_meta("\"x\": " + leaf_entry("[4, 2]") + ", \"x\": " + leaf_entry("[4, 2]"));
    require_error<CorruptData>(good.root, {"meta.json", "'x'", "appears twice"});
  }
}

TEST_CASE("a node of 100 000 keys loads in file order, in time linear in the keys") {
  // A hang guard, not a timing: a quadratic parse takes minutes here (21 s for 80 000 keys in a
  // release build), a linear one well under a second (seconds under a sanitizer on a busy machine).
  const Deadline deadline(180);
  const GoodTree good;
  constexpr int kKeys = 100'000;
  std::string entries;
  for (int i = kKeys - 1; i >= 0; --i) {  // descending: file order differs from sorted order
    if (!entries.empty()) entries += ", ";
    entries += "\"k";
    entries += std::to_string(i);
    entries += "\": {\"device\": \"cpu\", \"shape\": [4, 0], \"dtype\": "
               "\"torch.int32\", \"is_nested\": false}";
  }
  good.root_meta(entries);
  const TensorTree loaded = TensorTree::load_memmap(good.root);
  const std::vector<Path> keys = loaded.keys();
  std::vector<Path> expected_keys;
  for (int i = kKeys - 1; i >= 0; --i) {
    std::string expected = "k";  // not operator+: GCC 12 warns falsely about it (-Wrestrict)
    expected += std::to_string(i);
    expected_keys.push_back(Path{expected});
  }
  CHECK(keys == expected_keys);
  CHECK(loaded.get("k0").shape() == Shape{4, 0});
}
