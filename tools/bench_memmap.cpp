// memmap_ and load_memmap against the floors set by plain file I/O: saving a tree vs writing one
// file of the same bytes, and mapping a tree then reading every byte vs read() of that file from
// the page cache and vs memcpy between two buffers; reading a tree into one new block
// (MemmapMode::Copy) and into an existing tree (`out`) vs the same memcpy. With --device cuda, also loading the tree onto
// the GPU vs one copy of the same bytes from pinned host memory to the device. Prints a table (or
// CSV) and exits non-zero if a saved or loaded tree differs from its source.
//
//   bench_memmap [--mib 256] [--leaves 8,1000] [--no-fsync] [--device cuda] [--dir /path] [--csv]
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;
namespace fs = std::filesystem;

namespace {

struct Config {
  std::int64_t mib = 16;
  bool durable = true;
  int threads = 0;
  Device device = Device::cpu();  // cuda: also load onto the GPU
  fs::path dir;
};

// `leaves` float32 leaves of equal size, ten to a sub-tree, with values that differ per leaf.
TensorTree make_tree(int leaves, std::int64_t total_bytes) {
  constexpr std::int64_t kBatch = 16;
  const std::int64_t per_row = std::max<std::int64_t>(1, total_bytes / leaves / kBatch / 4);
  TensorTree tree(Shape{kBatch});
  for (int i = 0; i < leaves; ++i) {
    char group[32], leaf[32];
    std::snprintf(group, sizeof group, "group_%04d", i / 10);
    std::snprintf(leaf, sizeof leaf, "leaf_%05d", i);
    tree.set(Path{group, leaf}, Tensor::arange({kBatch, per_row}, i + 1, 0.5, {DType::Float32}));
  }
  return tree;
}

std::size_t tree_bytes(const TensorTree& tree) {
  std::size_t total = 0;
  for (const auto& [path, leaf] : tree.leaves()) total += leaf.nbytes();
  return total;
}

void check(bool ok, const char* what) {
  if (!ok) throw CorruptData(what);
}

void write_file(const fs::path& file, const std::vector<char>& bytes, bool durable) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, "cannot create the plain file");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    check(n > 0, "plain write failed");
    done += static_cast<std::size_t>(n);
  }
  if (durable) check(::fsync(fd) == 0, "fsync of the plain file failed");
  ::close(fd);
}

void read_file(const fs::path& file, std::vector<char>& bytes) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, "cannot open the plain file");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    check(n > 0, "plain read failed");
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// Every leaf's bytes, back to back, as one plain file holds them.
std::vector<char> flat_bytes(const TensorTree& tree) {
  std::vector<char> out;
  out.reserve(tree_bytes(tree));
  for (const auto& [path, leaf] : tree.leaves()) {
    const auto* data = static_cast<const char*>(leaf.data_ptr());
    out.insert(out.end(), data, data + leaf.nbytes());
  }
  return out;
}

// Maps the tree and copies every leaf into `dst`: what a reader pays to see all of it.
void load_and_read_all(const fs::path& dir, std::vector<char>& dst) {
  const TensorTree loaded = TensorTree::load_memmap(dir);
  std::size_t offset = 0;
  for (const auto& [path, leaf] : loaded.leaves()) {
    std::memcpy(dst.data() + offset, leaf.data_ptr(), leaf.nbytes());
    offset += leaf.nbytes();
  }
}

// load_memmap onto the GPU against one pinned host-to-device copy of the same bytes, the bus's
// limit: {GB/s, ratio}, or dashes on the CPU.
std::pair<std::string, std::string> time_cuda_load(const fs::path& tree_dir, const TensorTree& source,
                                                   const Config& config) {
  if (!config.device.is_cuda()) return {"-", "-"};
  const LoadMemmapOptions onto{.device = config.device};
  check(TensorTree::load_memmap(tree_dir, onto).to(Device::cpu()).equal(source),
        "a tree loaded onto the GPU differs from the saved one");
  const double t_load = bench::time_per_call([&] { (void)TensorTree::load_memmap(tree_dir, onto); });
  const auto n = static_cast<std::int64_t>(tree_bytes(source));
  const Tensor pinned = Tensor::zeros({n}, {.dtype = DType::UInt8, .pinned = true});
  const Tensor on_device = Tensor::empty({n}, {DType::UInt8, config.device});
  const double t_copy = bench::time_per_call([&] { on_device.copy_(pinned); });
  return {bench::fixed(static_cast<double>(n) / t_load / 1e9, 2), bench::fixed(t_copy / t_load, 2)};
}

void run_case(int leaves, const Config& config, bench::Table& table) {
  const TensorTree source = make_tree(leaves, config.mib << 20);
  const std::vector<char> expected = flat_bytes(source);
  const double bytes = static_cast<double>(expected.size());
  const fs::path tree_dir = config.dir / ("tree_" + std::to_string(leaves));
  const fs::path plain_file = config.dir / ("plain_" + std::to_string(leaves) + ".bin");
  const MemmapOptions options{.overwrite = MemmapOverwrite::Replace, .threads = config.threads, .durable = config.durable};

  TensorTree saved = source;
  saved.memmap_(tree_dir, options);
  check(saved.equal(source), "memmap_ changed the tree's values");
  const double t_save = bench::time_per_call([&] {
    TensorTree copy = source;
    copy.memmap_(tree_dir, options);
  }, 0.5, 3, 1000, 1);
  const double t_write = bench::time_per_call([&] { write_file(plain_file, expected, config.durable); }, 0.5, 3, 1000, 1);

  std::vector<char> dst(expected.size());
  load_and_read_all(tree_dir, dst);
  check(dst == expected, "a loaded tree differs from the saved one");
  std::fill(dst.begin(), dst.end(), 0);
  const double t_load = bench::time_per_call([&] { load_and_read_all(tree_dir, dst); });
  check(dst == expected, "a loaded tree differs from the saved one (timed runs)");
  const double t_read = bench::time_per_call([&] { read_file(plain_file, dst); });
  check(dst == expected, "the plain file differs from the tree's bytes");
  const double t_memcpy = bench::time_per_call([&] { std::memcpy(dst.data(), expected.data(), expected.size()); });
  const LoadMemmapOptions copied{.mode = MemmapMode::Copy};
  check(TensorTree::load_memmap(tree_dir, copied).equal(source), "a tree read into one block differs from the saved one");
  const double t_copy_load = bench::time_per_call([&] { (void)TensorTree::load_memmap(tree_dir, copied); });
  const LoadMemmapOptions into{.out = TensorTree::load_memmap(tree_dir, copied)};
  const double t_into = bench::time_per_call([&] { (void)TensorTree::load_memmap(tree_dir, into); });
  check(into.out->equal(source), "a tree read into an existing tree differs from the saved one");
  const auto [cuda_rate, cuda_vs_copy] = time_cuda_load(tree_dir, source, config);

  table.add({std::to_string(leaves) + " leaves", bench::fixed(bytes / 1048576.0, 1), bench::fixed(t_save * 1e3, 2),
             bench::fixed(bytes / t_save / 1e9, 2), bench::fixed(t_write / t_save, 2), bench::fixed(t_load * 1e3, 2),
             bench::fixed(bytes / t_load / 1e9, 2), bench::fixed(t_memcpy / t_load, 2),
             bench::fixed(t_read / t_load, 2), bench::fixed(t_copy_load * 1e3, 2), bench::fixed(t_memcpy / t_copy_load, 2),
             bench::fixed(t_into * 1e3, 2), bench::fixed(t_memcpy / t_into, 2), cuda_rate, cuda_vs_copy});
  fs::remove_all(tree_dir);
  fs::remove(plain_file);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memmap_ / load_memmap throughput against plain file I/O and memcpy"};
  Config config;
  std::vector<int> leaf_counts = {8, 100};
  bool csv = false;
  bool no_fsync = false;
  std::string dir = fs::temp_directory_path().string();
  std::string device_name = "cpu";
  app.add_option("--mib", config.mib, "bytes per tree, in MiB (the default is CI's quick run)")->check(CLI::PositiveNumber);
  app.add_option("--leaves", leaf_counts, "leaf counts, one tree each")->delimiter(',');
  app.add_option("--threads", config.threads, "writer threads for memmap_ (0: chosen from the size)");
  app.add_option("--device", device_name, "cpu, or cuda[:N] to also load onto that GPU");
  app.add_option("--dir", dir, "where the trees and files are written");
  app.add_flag("--no-fsync", no_fsync, "neither the saves nor the plain writes fsync");
  app.add_flag("--csv", csv, "print CSV instead of a table");
  CLI11_PARSE(app, argc, argv);
  config.durable = !no_fsync;
  const std::optional<Device> device = bench::measurable_device(device_name);
  if (!device) return 77;
  config.device = *device;

  std::random_device random;
  config.dir = fs::path(dir) / ("bench_memmap_" + std::to_string(::getpid()) + "_" + std::to_string(random()));
  fs::create_directories(config.dir);
  bench::Table table({"tree", "MiB", "save_ms", "save_GB/s", "vs_plain_write", "load+read_ms", "load_GB/s",
                      "vs_memcpy", "vs_plain_read", "copy_ms", "copy_vs_memcpy", "into_ms", "into_vs_memcpy", "cuda_load_GB/s",
                      "vs_pinned_h2d"},
                     csv);
  int status = 0;
  try {
    for (const int leaves : leaf_counts) run_case(leaves, config, table);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_memmap: %s\n", e.what());
    status = 1;
  }
  table.print();
  fs::remove_all(config.dir);
  return status;
}
