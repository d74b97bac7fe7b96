// memmap_ / load_memmap / memmap_like / empty_memmap: TensorDict's directory layout byte for byte,
// round trips of every dtype and awkward keys, lazy mapping, and rows shared between processes.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "memmap_test_support.hpp"

using namespace tensortree;
using namespace memmap_test;

namespace {

// Keys that are not plain file names, used both as leaves and as sub-tree names.
const std::vector<std::string> kAwkwardKeys = {"a/b", "..", ".", "two words", "100%", "", "tab\there",
                                               "q?<>:\"|*\\", "dots.in.key"};

TensorTree every_dtype_tree() {
  TensorTree tree(Shape{3});
  int seed = 1;
  for (DType dtype : kAllDTypes) {
    tree.set(Path{"dtypes", std::string(dtype_name(dtype))}, patterned({3, 4}, dtype, seed++));
  }
  tree.set(Path{"empty"}, Tensor::empty({3, 0, 2}, {DType::Float64}));
  tree.set(Path{"strided"}, patterned({5, 3}, DType::Int32, seed++).transpose(0, 1));
  TensorTree next(Shape{3, 2});
  next.set(Path{"reward"}, patterned({3, 2}, DType::Float32, seed++));
  next.set(Path{"deep", "obs"}, patterned({3, 2, 5}, DType::UInt16, seed++));
  tree.set(Path{"next"}, next);
  for (const std::string& key : kAwkwardKeys) {
    tree.set(Path{"keys", key}, patterned({3}, DType::Int64, seed++));
    tree.set(Path{"nodes", key, "leaf"}, patterned({3, 2}, DType::Int16, seed++));
  }
  return tree;
}

std::size_t resident_pages(const Tensor& leaf) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t bytes = leaf.storage()->nbytes();
  std::vector<unsigned char> residency((bytes + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page));
  REQUIRE(::mincore(leaf.storage()->data(), bytes, residency.data()) == 0);
  std::size_t count = 0;
  for (const unsigned char r : residency) count += r & 1;
  return count;
}

}  // namespace

TEST_CASE("encode_memmap_key escapes what TensorDict escapes and decodes back") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"obs", "obs"},           {"a/b", "a%2Fb"},       {"..", "%2E%2E"},         {".", "%2E"},
      {"", "%"},                {"two words", "two%20words"}, {"100%", "100%25"}, {"x\x01y", "x%01y"},
      {"del\x7f", "del%7F"},    {"q?<>:\"|*\\", "q%3F%3C%3E%3A%22%7C%2A%5C"},    {"...", "..."},
      {"caf\xc3\xa9", "caf\xc3\xa9"}, {std::string("nul\0x", 5), "nul%00x"},      {"a.b", "a.b"},
  };
  for (const auto& [key, name] : cases) {
    INFO("key '" << key << "'");
    CHECK(encode_memmap_key(key) == name);
    CHECK(decode_memmap_key(name) == key);
  }
  CHECK(decode_memmap_key("%2e%2e") == "..");
  for (const std::string& bad : std::vector<std::string>{"%2", "a%", "%G0", "a%0Zb", "a/b", std::string("a\0b", 3)}) {
    INFO("name '" << bad << "'");
    CHECK_THROWS_AS(decode_memmap_key(bad), CorruptData);
  }
}

TEST_CASE("a nested tree of every dtype, zero-size leaves and awkward keys round-trips byte for byte") {
  const ScratchDir scratch;
  const TensorTree source = every_dtype_tree();
  TensorTree saved = source;
  saved.memmap_(scratch / "tree");
  require_same_tree(saved, source);

  for (const MemmapMode mode : {MemmapMode::ReadOnly, MemmapMode::ReadWrite, MemmapMode::Copy}) {
    const TensorTree loaded = TensorTree::load_memmap(scratch / "tree", {.mode = mode});
    require_same_tree(loaded, source);
  }
  // Every key is one directory entry of its encoded name.
  const fs::path root = scratch / "tree";
  CHECK(fs::is_regular_file(root / "keys" / "a%2Fb.memmap"));
  CHECK(fs::is_regular_file(root / "keys" / "%2E%2E.memmap"));
  CHECK(fs::is_regular_file(root / "keys" / "%2E.memmap"));
  CHECK(fs::is_regular_file(root / "keys" / "%.memmap"));
  CHECK(fs::is_regular_file(root / "keys" / "two%20words.memmap"));
  CHECK(fs::is_regular_file(root / "keys" / "100%25.memmap"));
  CHECK(fs::is_regular_file(root / "nodes" / "%2E%2E" / "leaf.memmap"));
  CHECK(fs::is_regular_file(root / "nodes" / "%" / "meta.json"));
  CHECK(fs::file_size(root / "empty.memmap") == 0);
  CHECK(fs::file_size(root / "dtypes" / "complex128.memmap") == 3 * 4 * 16);
  // Nothing but the tree is left in the parent: the temporary directory was renamed into place.
  CHECK(std::distance(fs::directory_iterator(scratch.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("the bytes of a .memmap file are the leaf's C-order elements") {
  const ScratchDir scratch;
  TensorTree tree(Shape{2}, {{"m", Tensor::arange({2, 3}, 10, 1, {DType::Int32}).transpose(0, 1).contiguous().transpose(0, 1)}});
  const Tensor view = Tensor::arange({3, 2}, 10, 1, {DType::Int32}).transpose(0, 1);  // strided
  tree.set(Path{"m"}, view);
  tree.memmap_(scratch / "t");
  const std::string raw = read_text(scratch / "t" / "m.memmap");
  REQUIRE(raw.size() == 6 * sizeof(std::int32_t));
  std::int32_t values[6];
  std::memcpy(values, raw.data(), raw.size());
  // view[i][j] = 10 + j * 2 + i
  const std::int32_t expected[6] = {10, 12, 14, 11, 13, 15};
  for (int i = 0; i < 6; ++i) CHECK(values[i] == expected[i]);
}

TEST_CASE("meta.json matches TensorDict's layout field for field and character for character") {
  const ScratchDir scratch;
  TensorTree tree(Shape{2});
  tree.set(Path{"obs"}, patterned({2, 3}, DType::Float32, 1));
  tree.set(Path{"next", "reward"}, patterned({2, 1}, DType::Float64, 2));
  tree.set(Path{"done"}, patterned({2}, DType::Bool, 3));
  tree.set(Path{"a/b"}, patterned({2}, DType::BFloat16, 4));
  tree.memmap_(scratch / "td");

  const std::string root_text =
      "{\"obs\": {\"device\": \"cpu\", \"shape\": [2, 3], \"dtype\": \"torch.float32\", \"is_nested\": false}, "
      "\"next\": {\"type\": \"TensorDict\"}, "
      "\"done\": {\"device\": \"cpu\", \"shape\": [2], \"dtype\": \"torch.bool\", \"is_nested\": false}, "
      "\"a/b\": {\"device\": \"cpu\", \"shape\": [2], \"dtype\": \"torch.bfloat16\", \"is_nested\": false}, "
      "\"shape\": [2], \"device\": \"cpu\", \"_type\": \"<class 'tensordict._td.TensorDict'>\"}";
  const std::string next_text =
      "{\"reward\": {\"device\": \"cpu\", \"shape\": [2, 1], \"dtype\": \"torch.float64\", \"is_nested\": false}, "
      "\"shape\": [2], \"device\": \"cpu\", \"_type\": \"<class 'tensordict._td.TensorDict'>\"}";
  CHECK(read_text(scratch / "td" / "meta.json") == root_text);
  CHECK(read_text(scratch / "td" / "next" / "meta.json") == next_text);

  // Parsed, the file is the same object as TensorDict's text, key order too. (An ordered_json built
  // from nested initializer lists here took ASan's build four minutes to compile.)
  using Json = nlohmann::ordered_json;
  const Json expected_root = Json::parse(root_text);
  const Json parsed = Json::parse(read_text(scratch / "td" / "meta.json"));
  CHECK(parsed == expected_root);
  CHECK(parsed.dump() == expected_root.dump());  // key order too
  CHECK(Json::parse(read_text(scratch / "td" / "next" / "meta.json")) ==
        Json::parse(next_text));
}

TEST_CASE("every dtype is written as torch.<name> and read back") {
  const ScratchDir scratch;
  TensorTree tree(Shape{});
  int seed = 0;
  for (DType dtype : kAllDTypes) tree.set(Path{std::string(dtype_name(dtype))}, patterned({2}, dtype, seed++));
  tree.memmap_(scratch / "t");
  const auto meta = nlohmann::json::parse(read_text(scratch / "t" / "meta.json"));
  for (DType dtype : kAllDTypes) {
    std::string expected = "torch.";
    expected += dtype_name(dtype);
    CHECK(meta[std::string(dtype_name(dtype))]["dtype"] == expected);
  }
  CHECK(meta["float8_e4m3fn"]["dtype"] == "torch.float8_e4m3fn");
  CHECK(meta["bool"]["dtype"] == "torch.bool");
}

TEST_CASE("a directory laid out like DESIGN.md's TensorDict example loads") {
  const ScratchDir scratch;
  const fs::path root = scratch / "td";
  fs::create_directories(root / "nested");
  const std::string root_meta =
      "{\"nested\": {\"type\": \"TensorDict\"}, \"shape\": [2, 1], \"device\": \"cpu\", "
      "\"_type\": \"<class 'tensordict._td.TensorDict'>\"}";
  const std::string nested_meta =
      "{\"int64\": {\"device\": \"cpu\", \"shape\": [2, 1], \"dtype\": \"torch.int64\", \"is_nested\": false}, "
      "\"shape\": [2, 1], \"device\": \"cpu\", \"_type\": \"<class 'tensordict._td.TensorDict'>\"}";
  write_text(root / "meta.json", root_meta);
  write_text(root / "nested" / "meta.json", nested_meta);
  const std::int64_t values[2] = {7, -3};
  write_text(root / "nested" / "int64.memmap", std::string(reinterpret_cast<const char*>(values), 16));

  const TensorTree loaded = TensorTree::load_memmap(root);
  REQUIRE(loaded.batch_size() == Shape{2, 1});
  REQUIRE(loaded.subtree("nested").batch_size() == Shape{2, 1});
  const Tensor& leaf = loaded.get(Path{"nested", "int64"});
  REQUIRE(leaf.dtype() == DType::Int64);
  REQUIRE(leaf.shape() == Shape{2, 1});
  CHECK(leaf.at<std::int64_t>({0, 0}) == 7);
  CHECK(leaf.at<std::int64_t>({1, 0}) == -3);

  // Saving the same tree writes the same files, character for character.
  TensorTree copy = loaded.clone();
  copy.memmap_(scratch / "ours");
  CHECK(read_text(scratch / "ours" / "meta.json") == root_meta);
  CHECK(read_text(scratch / "ours" / "nested" / "meta.json") == nested_meta);
  CHECK(read_text(scratch / "ours" / "nested" / "int64.memmap") == read_text(root / "nested" / "int64.memmap"));
}

TEST_CASE("orjson's compact meta.json and TensorDict's legacy unencoded file names load") {
  const ScratchDir scratch;
  const fs::path root = scratch / "td";
  fs::create_directories(root);
  write_text(root / "meta.json",
             "{\"two words\":{\"device\":\"cpu\",\"shape\":[3],\"dtype\":\"torch.float32\",\"is_nested\":false},"
             "\"shape\":[3],\"device\":null,\"_type\":\"<class 'tensordict._td.TensorDict'>\"}");
  const float values[3] = {1.5f, -2.0f, 8.25f};
  write_text(root / "two words.memmap", std::string(reinterpret_cast<const char*>(values), sizeof values));
  const TensorTree loaded = TensorTree::load_memmap(root);
  const Tensor& leaf = loaded.get(Path{"two words"});
  for (std::int64_t i = 0; i < 3; ++i) CHECK(leaf.at<float>({i}) == values[i]);
}

TEST_CASE("a zero-byte leaf whose .memmap file TensorDict did not write loads, and is listed without a problem") {
  const ScratchDir scratch;
  const fs::path root = scratch / "td";
  fs::create_directories(root);
  write_text(root / "meta.json",
             "{\"empty\": {\"device\": \"cpu\", \"shape\": [2, 0], \"dtype\": \"torch.float32\", \"is_nested\": false}, "
             "\"obs\": {\"device\": \"cpu\", \"shape\": [2], \"dtype\": \"torch.int32\", \"is_nested\": false}, "
             "\"shape\": [2], \"device\": \"cpu\", \"_type\": \"<class 'tensordict._td.TensorDict'>\"}");
  const std::int32_t values[2] = {41, -5};
  write_text(root / "obs.memmap", std::string(reinterpret_cast<const char*>(values), sizeof values));
  REQUIRE_FALSE(fs::exists(root / "empty.memmap"));

  for (const bool writable : {false, true}) {
    const MemmapMode mode = writable ? MemmapMode::ReadWrite : MemmapMode::ReadOnly;
    const TensorTree loaded = TensorTree::load_memmap(root, {.mode = mode});
    const Tensor& empty = loaded.get("empty");
    CHECK(empty.shape() == Shape{2, 0});
    CHECK(empty.dtype() == DType::Float32);
    const Tensor& obs = loaded.get("obs");
    CHECK(obs.at<std::int32_t>({0}) == 41);
    CHECK(obs.at<std::int32_t>({1}) == -5);
  }
  const MemmapListing listing = list_memmap(root);
  CHECK(listing.problems.empty());
  REQUIRE(listing.entries.size() == 3);
  CHECK(listing.entries[1].nbytes == 0);
}

TEST_CASE("memmap_ turns the tree's leaves into views of the files") {
  const ScratchDir scratch;
  TensorTree tree(Shape{4}, {{"obs", patterned({4, 2}, DType::Float32, 3)}});
  tree.memmap_(scratch / "t");
  const Tensor& obs = tree.get("obs");
  CHECK(obs.storage()->kind() == MemoryKind::Foreign);
  obs.at<float>({2, 1}) = 1234.5f;
  CHECK(TensorTree::load_memmap(scratch / "t").get("obs").at<float>({2, 1}) == 1234.5f);

  // A read-write load writes through; a read-only load keeps its writes to itself.
  const TensorTree rw = TensorTree::load_memmap(scratch / "t", {.mode = MemmapMode::ReadWrite});
  rw.get("obs").at<float>({0, 0}) = -7.0f;
  CHECK(obs.at<float>({0, 0}) == -7.0f);
  const TensorTree ro = TensorTree::load_memmap(scratch / "t");
  ro.get("obs").at<float>({1, 0}) = 99.0f;
  CHECK(obs.at<float>({1, 0}) != 99.0f);
  CHECK(TensorTree::load_memmap(scratch / "t").get("obs").at<float>({1, 0}) != 99.0f);
}

TEST_CASE("sub_path loads one sub-tree with its own batch size") {
  const ScratchDir scratch;
  TensorTree tree = every_dtype_tree();
  const TensorTree source = tree;
  tree.memmap_(scratch / "t");
  const TensorTree next = TensorTree::load_memmap(scratch / "t", {.sub_path = {"next"}});
  require_same_tree(next, source.subtree("next"));
  const TensorTree deep = TensorTree::load_memmap(scratch / "t", {.sub_path = {"nodes", ".."}});
  require_same_tree(deep, source.subtree(Path{"nodes", ".."}));
  require_same_tree(TensorTree::load_memmap(scratch / "t", {.mode = MemmapMode::Copy, .sub_path = {"nodes", ".."}}),
                    source.subtree(Path{"nodes", ".."}));
  CHECK_THROWS_AS(TensorTree::load_memmap(scratch / "t", {.sub_path = {"missing"}}), InvalidArgument);
  CHECK_THROWS_AS(TensorTree::load_memmap(scratch / "t", {.sub_path = {"empty"}}), InvalidArgument);  // a leaf
}

TEST_CASE("the overwrite policy refuses, replaces, and never deletes foreign files") {
  const ScratchDir scratch;
  TensorTree first(Shape{2}, {{"x", patterned({2}, DType::Int32, 1)}});
  TensorTree second(Shape{3}, {{"y", patterned({3, 2}, DType::Float64, 2)}});
  const TensorTree second_source = second;
  first.memmap_(scratch / "t");
  CHECK_THROWS_AS(second.memmap_(scratch / "t"), InvalidArgument);
  require_same_tree(TensorTree::load_memmap(scratch / "t"), first);

  second.memmap_(scratch / "t", {.overwrite = MemmapOverwrite::Replace});
  require_same_tree(TensorTree::load_memmap(scratch / "t"), second_source);
  CHECK(!fs::exists(scratch / "t" / "x.memmap"));
  CHECK(std::distance(fs::directory_iterator(scratch.path()), fs::directory_iterator()) == 1);
  // The replaced tree's files are gone from the directory but `first` still views them.
  CHECK(bytes_of(first.get("x")) == bytes_of(patterned({2}, DType::Int32, 1)));

  fs::create_directories(scratch / "foreign");
  write_text(scratch / "foreign" / "notes.txt", "keep me");
  CHECK_THROWS_AS(second.memmap_(scratch / "foreign", {.overwrite = MemmapOverwrite::Replace}), InvalidArgument);
  CHECK(read_text(scratch / "foreign" / "notes.txt") == "keep me");

  fs::create_directories(scratch / "made_by_mkdtemp");
  TensorTree third(Shape{1}, {{"z", patterned({1}, DType::UInt8, 3)}});
  third.memmap_(scratch / "made_by_mkdtemp");
  CHECK(fs::exists(scratch / "made_by_mkdtemp" / "z.memmap"));
}

TEST_CASE("replacing a tree of hundreds of leaves leaves exactly the new tree, durable or not") {
  const ScratchDir scratch;
  const auto many = [](int seed, int leaves) {
    TensorTree tree(Shape{3});
    for (int i = 0; i < leaves; ++i) {
      tree.set(Path{numbered("g", i % 7), numbered("leaf", i)},
               patterned({3, 1 + i % 5}, i % 2 ? DType::Float32 : DType::Int16, seed + i));
    }
    return tree;
  };
  for (const bool durable : {true, false}) {
    INFO("durable " << durable);
    const fs::path dir = scratch / (durable ? "durable" : "volatile");
    for (const auto& [seed, leaves] : {std::pair{1, 400}, std::pair{2, 300}, std::pair{3, 450}}) {
      TensorTree tree = many(seed, leaves);
      const TensorTree source = tree.clone();
      tree.memmap_(dir, {.overwrite = MemmapOverwrite::Replace, .durable = durable});
      require_same_tree(tree, source);
      require_same_tree(TensorTree::load_memmap(dir), source);
    }
  }
  // Each replaced tree and each temporary directory is gone: only the two targets remain.
  CHECK(std::distance(fs::directory_iterator(scratch.path()), fs::directory_iterator()) == 2);
}

TEST_CASE("keys that would share a file name, or make one over 255 bytes, are InvalidArgument and write nothing") {
  const ScratchDir scratch;
  const auto require_refused = [&](const TensorTree& tree, const std::vector<std::string>& fragments) {
    const fs::path target = scratch / "refused";
    try {
      TensorTree copy = tree;
      copy.memmap_(target);
      FAIL("memmap_ accepted keys that collide on disk");
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      INFO(message);
      for (const std::string& fragment : fragments) CHECK(message.find(fragment) != std::string::npos);
    }
    CHECK_FALSE(fs::exists(target));
  };
  const Tensor leaf = patterned({2, 3}, DType::Int32, 4);
  SECTION("a leaf 'a' beside a sub-tree 'a.memmap'") {
    TensorTree tree(Shape{2});
    tree.set(Path{"a"}, leaf);
    tree.set(Path{"a.memmap", "b"}, leaf);
    require_refused(tree, {"'a.memmap'", "'a'", "both be saved as 'a.memmap'"});
  }
  SECTION("a sub-tree named meta.json, nested") {
    TensorTree tree(Shape{2});
    tree.set(Path{"next", "meta.json", "x"}, leaf);
    require_refused(tree, {"next.meta.json", "metadata", "'meta.json'"});
  }
  SECTION("a key of 300 bytes") {
    TensorTree tree(Shape{2});
    tree.set(Path{std::string(300, 'k')}, leaf);
    require_refused(tree, {"307 bytes", "limit of 255"});
  }
}

TEST_CASE("progress reports reach the total and threads write the same bytes") {
  const ScratchDir scratch;
  TensorTree tree(Shape{8});
  for (int i = 0; i < 6; ++i) tree.set(Path{"leaf" + std::to_string(i)}, patterned({8, 1 << 20}, DType::UInt8, i));
  const TensorTree source = tree;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> reports;
  tree.memmap_(scratch / "t", {.threads = 3, .progress = [&](std::uint64_t done, std::uint64_t total) {
                                  reports.emplace_back(done, total);
                                }});
  REQUIRE(!reports.empty());
  CHECK(reports.back().first == 48u << 20);
  CHECK(reports.back().second == 48u << 20);
  for (std::size_t i = 1; i < reports.size(); ++i) CHECK(reports[i].first >= reports[i - 1].first);
  require_same_tree(TensorTree::load_memmap(scratch / "t"), source);
}

TEST_CASE("empty_memmap preallocates sparse zero-filled leaves of shape batch_size + step shape") {
  const ScratchDir scratch;
  TensorTree step(Shape{});
  step.set(Path{"obs"}, patterned({3, 2}, DType::Float32, 1));
  step.set(Path{"next", "reward"}, patterned({}, DType::Float64, 2));
  TensorTree replay = empty_memmap(scratch / "replay", step, {1000});
  REQUIRE(replay.batch_size() == Shape{1000});
  REQUIRE(replay.get("obs").shape() == Shape{1000, 3, 2});
  REQUIRE(replay.subtree("next").batch_size() == Shape{1000});
  REQUIRE(replay.get(Path{"next", "reward"}).shape() == Shape{1000});
  struct stat st {};
  REQUIRE(::stat((scratch / "replay" / "obs.memmap").c_str(), &st) == 0);
  CHECK(st.st_size == 1000 * 6 * 4);
  CHECK(st.st_blocks * 512 < st.st_size);  // sparse: nothing was written
  const Tensor& obs = replay.get("obs");
  for (std::int64_t i = 0; i < obs.numel(); ++i) REQUIRE(obs.value_at_linear(i) == 0.0);

  // A template with a batch dimension keeps what follows it.
  TensorTree batch(Shape{4, 5}, {{"a", patterned({4, 5, 7}, DType::Int16, 3)}});
  const TensorTree other = empty_memmap(scratch / "other", batch, {10});
  CHECK(other.batch_size() == Shape{10});
  CHECK(other.get("a").shape() == Shape{10, 7});

  const TensorTree like = batch.memmap_like(scratch / "like");
  CHECK(like.batch_size() == Shape{4, 5});
  CHECK(like.get("a").shape() == Shape{4, 5, 7});
  CHECK(like.get("a").value_at_linear(17) == 0.0);
  CHECK_THROWS_AS(empty_memmap(scratch / "bad", step, {-1}), InvalidArgument);
}

TEST_CASE("processes sharing a read-write memmap write disjoint rows") {
  const ScratchDir scratch;
  TensorTree step(Shape{}, {{"obs", patterned({5}, DType::Int64, 0)}});
  (void)empty_memmap(scratch / "replay", step, {40});
  constexpr int kWriters = 4;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        const TensorTree tree = TensorTree::load_memmap(scratch / "replay", {.mode = MemmapMode::ReadWrite});
        const Tensor& obs = tree.get("obs");
        for (std::int64_t row = w * 10; row < (w + 1) * 10; ++row) {
          for (std::int64_t j = 0; j < 5; ++j) obs.at<std::int64_t>({row, j}) = 1000 * (w + 1) + row * 10 + j;
        }
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  const Tensor obs = TensorTree::load_memmap(scratch / "replay").get("obs");
  for (std::int64_t row = 0; row < 40; ++row) {
    for (std::int64_t j = 0; j < 5; ++j) REQUIRE(obs.at<std::int64_t>({row, j}) == 1000 * (row / 10 + 1) + row * 10 + j);
  }
}

TEST_CASE("a slice of a loaded tree views the mapping and its clone copies only the slice") {
  const ScratchDir scratch;
  TensorTree tree(Shape{100}, {{"x", patterned({100, 64}, DType::Float32, 1)}});
  const TensorTree source = tree;
  tree.memmap_(scratch / "t");
  const TensorTree loaded = TensorTree::load_memmap(scratch / "t");
  const TensorTree rows = loaded.slice(0, {10, 20});
  CHECK(rows.get("x").storage() == loaded.get("x").storage());
  const TensorTree copy = rows.clone();
  CHECK(copy.get("x").storage()->nbytes() == 10 * 64 * sizeof(float));
  require_same_tree(copy, source.slice(0, {10, 20}));
}

TEST_CASE("loading a 1 GiB tree and reading one row touches O(row) pages") {
  const ScratchDir scratch;
  constexpr std::int64_t kRows = 4096;
  constexpr std::int64_t kRowBytes = 256 << 10;  // 4096 x 256 KiB = 1 GiB
  TensorTree step(Shape{}, {{"frames", Tensor::zeros({kRowBytes}, {DType::UInt8})}});
  (void)empty_memmap(scratch / "big", step, {kRows});
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t row_pages = kRowBytes / page;

  // Rows far apart, so that each load's reads stay clear of the other's pages in the page cache.
  auto touched_by_one_row = [&](bool random_access, std::int64_t row_index) {
    const TensorTree loaded = TensorTree::load_memmap(scratch / "big", {.random_access = random_access});
    const Tensor& frames = loaded.get("frames");
    REQUIRE(frames.nbytes() == std::size_t{1} << 30);
    const std::size_t before = resident_pages(frames);
    const Tensor row = loaded.index(row_index).get("frames");
    const auto* data = static_cast<const unsigned char*>(row.data_ptr());
    std::uint64_t sum = 0;
    for (std::int64_t i = 0; i < kRowBytes; ++i) sum += data[i];
    CHECK(sum == 0);
    return std::pair{before, resident_pages(frames)};
  };

  const auto [before_random, after_random] = touched_by_one_row(true, 1000);
  CHECK(before_random == 0);  // mapping reads nothing
  WARN("one " << kRowBytes / 1024 << " KiB row (" << row_pages << " pages) of a 1 GiB tree ("
              << (std::size_t{1} << 30) / page << " pages): " << after_random
              << " resident pages with random_access");
  CHECK(after_random >= row_pages);
  CHECK(after_random <= row_pages + 16);

  // Without the advice the kernel reads around each fault (read_ahead_kb, 8 MiB on some disks):
  // still a constant window, not the file.
  const auto [before_default, after_default] = touched_by_one_row(false, 3000);
  CHECK(before_default == after_random);
  WARN("the same with default advice: " << after_default - before_default << " more resident pages");
  CHECK(after_default - before_default >= row_pages);
  CHECK(after_default - before_default <= row_pages + 8192);
}

namespace {

std::size_t mappings_of_this_process() {
  std::ifstream maps("/proc/self/maps");
  return static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(maps), {}, '\n'));
}

}  // namespace

TEST_CASE("MemmapMode::Copy reads every leaf into one block: nothing stays mapped, the files may go, writes stay here") {
  const ScratchDir scratch;
  constexpr int kLeaves = 2000;
  TensorTree tree(Shape{3});
  for (int i = 0; i < kLeaves; ++i) {
    tree.set(Path{numbered("group", i % 7), numbered("leaf", i)}, patterned({3, 1 + i % 5}, DType::Int32, i));
  }
  const TensorTree source = tree.clone();
  tree.memmap_(scratch / "t", {.durable = false});

  const std::size_t before = mappings_of_this_process();
  TensorTree loaded = TensorTree::load_memmap(scratch / "t", {.mode = MemmapMode::Copy, .staging_bytes = 4096});
  // One block, not a mapping per leaf (vm.max_map_count would stop a tree of 65 530 leaves).
  CHECK(mappings_of_this_process() < before + 16);
  const Storage* block = nullptr;
  loaded.for_each_leaf([&](const Path& path, const Tensor& leaf) {
    INFO(path_str(path));
    if (block == nullptr) block = leaf.storage().get();
    CHECK(leaf.storage().get() == block);
  });

  fs::remove_all(scratch / "t");
  require_same_tree(loaded, source);
  loaded.get(Path{"group3", "leaf3"}).fill_(-5);  // this process's memory only
  CHECK(loaded.get(Path{"group3", "leaf3"}).equal(Tensor::full({3, 4}, -5, {DType::Int32})));
}

TEST_CASE("load_memmap with `out` reads the files into that tree's leaves, and refuses one of another layout") {
  const ScratchDir scratch;
  TensorTree tree = every_dtype_tree();
  const TensorTree source = tree.clone();
  tree.memmap_(scratch / "t");

  TensorTree out = source.apply([](const Tensor& leaf) { return Tensor::zeros(leaf.shape(), {leaf.dtype()}); });
  const std::vector<std::pair<Path, Tensor>> before = out.leaves();
  const TensorTree loaded = TensorTree::load_memmap(scratch / "t", {.out = out});
  require_same_tree(out, source);
  require_same_tree(loaded, source);
  for (const auto& [path, leaf] : before) {  // the same memory, written in place
    INFO(path_str(path));
    CHECK(out.get(path).data_ptr() == leaf.data_ptr());
  }

  const auto refused = [&](const TensorTree& target, const std::string& fragment) {
    try {
      (void)TensorTree::load_memmap(scratch / "t", {.out = target});
      FAIL("load_memmap read into a tree of another layout");
    } catch (const InvalidArgument& e) {
      CHECK_THAT(e.what(), Catch::Contains(fragment));
    }
  };
  TensorTree wrong_dtype = out.clone();
  wrong_dtype.set(Path{"next", "reward"}, Tensor::zeros(out.get(Path{"next", "reward"}).shape(), {DType::Float64}));
  refused(wrong_dtype, "'next.reward'");
  TensorTree missing = out.clone();
  missing.erase(Path{"next", "reward"});
  refused(missing, "'next.reward'");
  TensorTree extra = out.clone();
  extra.set(Path{"next", "surplus"}, Tensor::zeros({3, 2}, {DType::Int8}));
  refused(extra, "'next.surplus'");
  TensorTree strided = out.clone();
  strided.set(Path{"strided"}, Tensor::zeros({5, 3}, {DType::Int32}).transpose(0, 1));
  refused(strided, "contiguous on the CPU");
}

TEST_CASE("loading onto a CUDA device without one is NotSupported") {
  if (cuda_device_count() > 0) return;  // tests/gpu covers the device path
  const ScratchDir scratch;
  TensorTree tree(Shape{2}, {{"x", patterned({2}, DType::Float32, 1)}});
  tree.memmap_(scratch / "t");
  CHECK_THROWS_AS(TensorTree::load_memmap(scratch / "t", {.device = Device::cuda(0)}), NotSupported);
}
