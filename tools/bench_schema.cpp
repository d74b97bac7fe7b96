// What the schema costs per leaf: Schema::plan of a new structure, encode() and decode() of its
// envelope (decode includes every validation a peer's bytes get), against issue 13's goals of
// 100 ns per leaf to encode and 150 ns per leaf to decode. Prints a table (or CSV) and exits
// non-zero if a decoded schema differs from the encoded one.
//
//   bench_schema [--leaves 1000,10000] [--csv]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/schema.hpp"

using namespace tensortree;

namespace {

struct Structure {
  std::vector<NodeSpec> nodes;
  std::vector<LeafPlan> leaves;
};

// The shape of bench_consolidate's trees: mixed dtypes, ten leaves to a sub-tree, batch [4].
Structure make_structure(int leaves) {
  constexpr DType kMix[] = {DType::Float32, DType::Int64, DType::UInt8};
  Structure s;
  s.nodes.push_back({{}, {4}, {}});
  for (int i = 0; i < leaves; ++i) {
    char group[32], leaf[32];
    std::snprintf(group, sizeof group, "group_%04d", i / 10);
    std::snprintf(leaf, sizeof leaf, "leaf_%05d", i);
    if (i % 10 == 0) {
      s.nodes.push_back({{group}, {4}, {}});
      s.nodes.front().keys.push_back(group);
    }
    s.nodes.back().keys.push_back(leaf);
    s.leaves.push_back({{group, leaf}, kMix[i % 3], {4, 4}});
  }
  return s;
}

bool run_case(int leaves, bench::Table& table) {
  const Structure structure = make_structure(leaves);
  const Schema schema = Schema::plan(structure.nodes, structure.leaves, DeviceType::CPU);
  const std::vector<std::byte> bytes = schema.encode();
  if (Schema::decode(bytes) != schema) {
    std::fprintf(stderr, "bench_schema: the schema of %d leaves does not survive encode then decode\n", leaves);
    return false;
  }
  const double t_plan = bench::time_per_call([&] { (void)Schema::plan(structure.nodes, structure.leaves, DeviceType::CPU); }, 0.2);
  const double t_encode = bench::time_per_call([&] { (void)schema.encode(); }, 0.2);
  const double t_decode = bench::time_per_call([&] { (void)Schema::decode(bytes); }, 0.2);
  const double per_leaf = 1e9 / leaves;
  table.add({std::to_string(leaves), std::to_string(bytes.size()), bench::fixed(t_plan * 1e3, 2),
             bench::fixed(t_encode * 1e6, 1), bench::fixed(t_encode * per_leaf, 1), "100",
             bench::fixed(t_decode * 1e6, 1), bench::fixed(t_decode * per_leaf, 1), "150"});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Schema plan / encode / decode cost per leaf"};
  std::vector<int> leaf_counts = {1000, 10000};
  bool csv = false;
  app.add_option("--leaves", leaf_counts, "leaf counts, one structure each")->delimiter(',')->check(CLI::PositiveNumber);
  app.add_flag("--csv", csv, "print CSV instead of a table");
  CLI11_PARSE(app, argc, argv);

  bench::Table table({"leaves", "bytes", "plan_ms", "encode_us", "encode_ns/leaf", "encode_goal_ns", "decode_us",
                      "decode_ns/leaf", "decode_goal_ns"},
                     csv);
  bool ok = true;
  for (const int leaves : leaf_counts) ok = run_case(leaves, table) && ok;
  table.print();
  return ok ? 0 : 1;
}
