// Writes each fuzz target's seed corpus from real values: encoded schemas and wire headers of small
// trees, meta.json files and whole directories that memmap_ saved, sealed object archives. Run by
// tools/fuzz before fuzzing; its output for the committed corpus is in tests/fuzz/corpus/.
//
//   make_seeds OUT_DIR
#include <boost/serialization/map.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tensortree/dist_objects.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"
#include "wire/wire_header.hpp"
#include "object_types.hpp"

using namespace tensortree;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& file, const void* data, std::size_t size) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void write(const fs::path& file, const std::string& text) { write(file, text.data(), text.size()); }

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Small trees of the shapes the targets read: nested, several dtypes, a zero-size leaf.
std::vector<TensorTree> sample_trees() {
  std::vector<TensorTree> trees;
  TensorTree a(Shape{4});
  a.set("x", Tensor::arange({4, 2}, 1.0, 1.0, {DType::Float32}));
  a.set("next.y", Tensor::arange({4}, 7.0, 1.0, {DType::Int64}));
  trees.push_back(a);
  TensorTree b(Shape{2, 3});
  b.set("obs", Tensor::arange({2, 3, 5}, 1.0, 0.5, {DType::Float16}));
  b.set("next.reward", Tensor::arange({2, 3}, -1.0, 1.0, {DType::Float64}));
  b.set("next.done", Tensor::zeros({2, 3}, {DType::Bool}));
  b.set("empty", Tensor::zeros({2, 3, 0}, {DType::Int32}));
  trees.push_back(b);
  return trees;
}

void schema_and_wire_seeds(const fs::path& out, const std::vector<TensorTree>& trees) {
  for (std::size_t i = 0; i < trees.size(); ++i) {
    const TensorTree packed = trees[i].consolidate();
    const std::vector<std::byte> schema = packed.schema()->encode();
    write(out / "schema" / ("tree" + std::to_string(i)), schema.data(), schema.size());
    const detail::WireHeader header{packed.schema()->fingerprint(), packed.schema()->total_bytes(), schema.size()};
    std::byte bytes[kWireHeaderBytes];
    detail::write_wire_header(header, bytes, Device::cpu());
    write(out / "wire_header" / ("tree" + std::to_string(i)), bytes, sizeof bytes);
  }
}

// The same cut as fuzz_memmap_dir.cpp: meta.json, next/meta.json, x.memmap, next/y.memmap.
void memmap_seeds(const fs::path& out, const TensorTree& tree) {
  const fs::path dir = out / "tmp_memmap";
  TensorTree copy = tree.clone();
  copy.memmap_(dir, {.overwrite = MemmapOverwrite::Replace});
  const std::string cut = "\xff\xfe\xfd\xfc";
  const std::string joined = read(dir / "meta.json") + cut + read(dir / "next" / "meta.json") + cut +
                             read(dir / "x.memmap") + cut + read(dir / "next" / "y.memmap");
  write(out / "memmap_dir" / "tree0", joined);
  write(out / "meta_json" / "root", read(dir / "meta.json"));
  write(out / "meta_json" / "next", read(dir / "next" / "meta.json"));
  fs::remove_all(dir);
}

template <class T>
void object_seed(const fs::path& file, unsigned char type, const T& value) {
  const dist::detail::Bytes envelope = dist::detail::to_bytes(value);
  std::string input(1, static_cast<char>(type));
  // The target seals the archive itself: the seed is the archive behind the envelope's header.
  const std::string archive = dist::detail::unseal(envelope);
  input += archive;
  write(file, input);
}

void object_seeds(const fs::path& out) {
  object_seed(out / "object" / "string", 0, std::string("trajectory 17"));
  object_seed(out / "object" / "vector", 1, std::vector<std::int64_t>{1, -2, 3, 1LL << 40});
  object_seed(out / "object" / "map", 2, std::map<std::string, double>{{"lr", 1e-3}, {"gamma", 0.99}});
  object_seed(out / "object" / "pair", 3, std::pair<std::int32_t, std::string>{7, "actor"});
  object_seed(out / "object" / "nested", 4, std::vector<std::vector<float>>{{1.5f}, {}, {2.0f, -3.0f}});
  object_seed(out / "object" / "flags", 5,
              fuzz::Flags{true, fuzz::Phase::Learn, {false, true, true}, {true, false, true, true}});
  object_seed(out / "object" / "bools", 6, std::vector<bool>{false, true, false});
  object_seed(out / "object" / "map_of_vectors", 7,
              std::map<std::int64_t, std::vector<std::string>>{{3, {"a", "b"}}, {-1, {}}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  const std::vector<TensorTree> trees = sample_trees();
  schema_and_wire_seeds(out, trees);
  memmap_seeds(out, trees[0]);
  object_seeds(out);
  std::printf("seeds written under %s\n", out.c_str());
  return 0;
}
