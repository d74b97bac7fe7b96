// consolidate() against the floor set by memcpy: how close packing a tree comes to copying the same
// bytes as one block, and what each leaf costs when leaves are tiny. consolidate_us builds a new
// tree each time (its buffer reused); refresh_us is consolidate_into() an earlier result, the
// steady state of a sender (walk and copy only); async_us is consolidate_async() with eight in
// flight (the GPU pipeline). Prints a table (or CSV) and exits non-zero if a
// consolidated or refreshed tree differs from its source.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

struct TreeCase {
  int leaves;
  std::int64_t leaf_bytes;
};

const std::vector<TreeCase> kCases = {
    {8, 8 << 20}, {100, 100 << 10}, {1000, 4 << 10}, {1000, 64}, {10000, 64},
};

constexpr DType kMix[] = {DType::Float32, DType::Int64, DType::UInt8};
constexpr std::int64_t kBatch = 4;

// Leaves of mixed dtypes, ten to a sub-tree, each of exactly `leaf_bytes` bytes.
TensorTree make_tree(const TreeCase& c, Device device) {
  TensorTree tree(Shape{kBatch});
  for (int i = 0; i < c.leaves; ++i) {
    const DType dtype = kMix[i % 3];
    const std::int64_t per_row = c.leaf_bytes / kBatch / static_cast<std::int64_t>(itemsize(dtype));
    char group[32], leaf[32];
    std::snprintf(group, sizeof group, "group_%04d", i / 10);
    std::snprintf(leaf, sizeof leaf, "leaf_%05d", i);
    tree.set({group, leaf}, Tensor::arange({kBatch, per_row}, i + 1, 1, {dtype, device}));
  }
  return tree;
}

std::string label(const TreeCase& c) {
  const std::int64_t b = c.leaf_bytes;
  const std::string size = b >= (1 << 20) ? std::to_string(b >> 20) + " MiB"
                           : b >= (1 << 10) ? std::to_string(b >> 10) + " KiB"
                                            : std::to_string(b) + " B";
  return std::to_string(c.leaves) + " x " + size;
}

// consolidate() returns with every byte in place, but a device-to-device copy_ returns once the copy
// is queued: the baselines wait for their copies as a caller would, by reading one byte back (on
// the same stream, so after the copies), to time the same thing.
void wait_for_copies(const Tensor& written) {
  if (written.device().is_cuda()) (void)written.narrow(0, 0, 1).to(Device::cpu());
}

// Copies every leaf into a dense tensor of the total size: the same bytes, one copy per leaf.
double time_copy_per_leaf(const TensorTree& tree, const Tensor& flat) {
  const auto leaves = tree.leaves();
  return bench::time_per_call([&] {
    std::int64_t offset = 0;
    for (const auto& [path, leaf] : leaves) {
      const auto n = static_cast<std::int64_t>(leaf.nbytes());
      flat.narrow(0, offset, n).copy_(Tensor(leaf.storage(), leaf.byte_offset(), DType::UInt8, {n}, {1}));
      offset += n;
    }
    wait_for_copies(flat);
  });
}

bool run_case(const TreeCase& c, Device device, int threads, bench::Table& table) {
  const TensorTree tree = make_tree(c, device);
  TensorTree packed = tree.consolidate();
  if (!packed.equal(tree)) {
    std::fprintf(stderr, "consolidated tree %s differs from its source\n", label(c).c_str());
    return false;
  }
  const StoragePtr warm = packed.storage();
  const double t_pack = bench::time_per_call([&] { packed = tree.consolidate({.threads = threads, .reuse = warm}); });
  const double t_refresh = bench::time_per_call([&] { tree.consolidate_into(packed, {.threads = threads}); });
  // consolidate_async() back to back, waiting for the last: what a pipeline that never waits on
  // the host pays per tree (on a CPU the same as consolidate()).
  constexpr int kInFlight = 8;
  const double t_async = bench::time_per_call([&] {
    WorkPtr last;
    for (int i = 0; i < kInFlight; ++i) last = tree.consolidate_async({.threads = threads, .reuse = warm}).work;
    last->wait();
  }) / kInFlight;
  // New values in the source: a refresh that skipped the copy would now differ.
  tree.fill_(3);
  tree.consolidate_into(packed, {.threads = threads});
  if (packed.storage() != warm || !packed.equal(tree)) {
    std::fprintf(stderr, "refreshed tree %s differs from its source or left its buffer\n", label(c).c_str());
    return false;
  }

  const auto total = static_cast<std::int64_t>(packed.schema()->total_bytes());
  const Tensor src = Tensor::full({total}, 7, {DType::UInt8, device});
  const Tensor dst = Tensor::zeros({total}, {DType::UInt8, device});
  const double t_memcpy = bench::time_per_call([&] {
    dst.copy_(src);
    wait_for_copies(dst);
  });
  const double t_per_leaf = time_copy_per_leaf(tree, dst);

  const std::vector<std::byte> encoded = packed.schema()->encode();
  const double t_encode = bench::time_per_call([&] { (void)packed.schema()->encode(); }, 0.1);
  const double t_decode = bench::time_per_call([&] { (void)Schema::decode(encoded); }, 0.1);

  table.add({device.str(), label(c), bench::fixed(total / 1048576.0, 2), bench::fixed(t_pack * 1e6, 1),
             bench::fixed(total / t_pack / 1e9, 2), bench::fixed(t_memcpy / t_pack, 2),
             bench::fixed(t_per_leaf / t_pack, 2), bench::fixed(t_pack * 1e9 / c.leaves, 1),
             bench::fixed(t_refresh * 1e6, 1), bench::fixed(t_refresh * 1e9 / c.leaves, 1),
             bench::fixed(t_async * 1e6, 1), bench::fixed(t_memcpy / t_async, 2),
             bench::fixed(t_encode * 1e6, 1), bench::fixed(t_decode * 1e6, 1)});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"consolidate() throughput against memcpy of the same bytes"};
  bool csv = false;
  int max_cases = static_cast<int>(kCases.size());
  std::string device_name = "cpu";
  int threads = 0;
  app.add_flag("--csv", csv, "print CSV instead of a table");
  app.add_option("--cases", max_cases, "run only the first N tree shapes (CI uses a small N)");
  app.add_option("--device", device_name, "cpu, cuda or cuda:N");
  app.add_option("--threads", threads, "CPU packing threads (0: chosen from the size)");
  CLI11_PARSE(app, argc, argv);

  const std::optional<Device> measured = bench::measurable_device(device_name);
  if (!measured) return 77;
  const Device device = *measured;
  bench::Table table({"device", "tree", "MiB", "consolidate_us", "GB/s", "vs_memcpy", "vs_copy_per_leaf",
                      "ns/leaf", "refresh_us", "refresh_ns/leaf", "async_us", "async_vs_memcpy", "encode_us",
                      "decode_us"},
                     csv);
  bool ok = true;
  for (int i = 0; i < max_cases && i < static_cast<int>(kCases.size()); ++i) {
    ok = run_case(kCases[static_cast<std::size_t>(i)], device, threads, table) && ok;
  }
  table.print();
  return ok ? 0 : 1;
}
