// Weight publication against its floors, in one run: publishing a parameter tree vs one memcpy of
// its bytes (and vs the same memcpy into shared memory), a subscriber's latest() (a lease on the newest version, no copy) and latest_version(),
// and copying a version out vs the same memcpy. Publisher and subscriber share this process (the
// lease protocol and the mapping are those of two processes). Every timed publish is checked:
// the subscriber reads back the last version, every byte compared. Prints a table (or CSV); exits
// non-zero on a wrong value.
//
//   bench_weights [--mib 40] [--leaves 20] [--threads 0] [--csv]
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/tensortree.hpp"
#include "tensortree/weights.hpp"

using namespace tensortree;

namespace {

struct Config {
  std::int64_t mib = 40;
  int leaves = 20;
  int threads = 0;
};

// `leaves` float32 leaves of equal size, five to a sub-tree, values set by `version`.
TensorTree make_params(const Config& config, int version) {
  const std::int64_t per_leaf = std::max<std::int64_t>(1, (config.mib << 20) / config.leaves / 4);
  TensorTree tree;
  for (int i = 0; i < config.leaves; ++i) {
    char path[48];
    std::snprintf(path, sizeof path, "layer_%03d.param_%03d", i / 5, i);
    tree.set(path, Tensor::arange({per_leaf}, version * 1000 + i, 0.25, {DType::Float32}));
  }
  return tree;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw CorruptData("bench_weights: " + what);
}

std::size_t tree_bytes(const TensorTree& tree) {
  std::size_t total = 0;
  for (const auto& [path, leaf] : tree.leaves()) total += leaf.nbytes();
  return total;
}

std::string per_call(double seconds) {
  return seconds < 1e-4 ? bench::fixed(seconds * 1e9, 0) + " ns" : bench::fixed(seconds * 1e3, 3) + " ms";
}

void add_row(bench::Table& table, const std::string& what, double bytes, double seconds, double memcpy_seconds,
             const std::string& goal) {
  table.add({what, bytes > 0 ? bench::fixed(bytes / 1048576.0, 1) : "-", per_call(seconds),
             bytes > 0 ? bench::fixed(bytes / seconds / 1e9, 2) : "-",
             memcpy_seconds > 0 ? bench::fixed(seconds / memcpy_seconds, 2) : "-", goal});
}

void run(const Config& config, bench::Table& table) {
  std::random_device random;
  const std::string name = "tt-bench-weights-" + std::to_string(::getpid()) + "-" + std::to_string(random());
  const TensorTree versions[2] = {make_params(config, 1), make_params(config, 2)};
  const auto bytes = static_cast<double>(tree_bytes(versions[0]));

  std::vector<char> src(static_cast<std::size_t>(bytes), 1), dst(static_cast<std::size_t>(bytes), 0);
  const double t_memcpy = bench::time_per_call([&] { std::memcpy(dst.data(), src.data(), src.size()); });
  add_row(table, "memcpy (the floor)", bytes, t_memcpy, t_memcpy, "-");
  // The same copy into shared memory (a memfd), where the slots live: the floor a publish writes to.
  const StoragePtr shared = Storage::allocate_shared(src.size());
  const double t_shared = bench::time_per_call([&] { std::memcpy(shared->data(), src.data(), src.size()); });
  add_row(table, "memcpy into shared memory", bytes, t_shared, t_memcpy, "-");

  WeightPublisher publisher(name, {.threads = config.threads});
  publisher.publish(versions[0]);
  const WeightSubscriber subscriber(name);
  int next = 0;
  const double t_publish = bench::time_per_call([&] { publisher.publish(versions[next ^= 1]); });
  check(subscriber.latest().tree().equal(versions[next]), "the newest version differs from the tree published");
  add_row(table, "publish", bytes, t_publish, t_memcpy, "<= 1.2x memcpy");

  const double t_latest = bench::time_per_call([&] { (void)subscriber.latest(); }, 0.25, 1000, 10000000, 100);
  add_row(table, "latest() (lease, no copy)", 0, t_latest, 0, "<= 2 us");
  std::uint64_t seen = 0;
  const double t_version = bench::time_per_call([&] { seen += subscriber.latest_version(); }, 0.25, 1000, 10000000);
  check(seen > 0, "latest_version() saw nothing");
  add_row(table, "latest_version()", 0, t_version, 0, "-");

  const TensorTree mine = make_params(config, 0);
  const double t_copy_into = bench::time_per_call([&] { (void)subscriber.copy_into(mine); });
  check(mine.equal(versions[next]), "copy_into delivered other values");
  add_row(table, "copy_into (own leaves)", bytes, t_copy_into, t_memcpy, "-");
  const double t_latest_copy = bench::time_per_call([&] { (void)subscriber.latest_copy(); });
  check(subscriber.latest_copy().second.equal(versions[next]), "latest_copy delivered other values");
  add_row(table, "latest_copy (new buffer)", bytes, t_latest_copy, t_memcpy, "-");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weight publication against memcpy: publish, latest(), copies out"};
  Config config;
  bool csv = false;
  app.add_option("--mib", config.mib, "bytes of the parameter tree, in MiB")->check(CLI::PositiveNumber);
  app.add_option("--leaves", config.leaves, "leaves of the parameter tree")->check(CLI::PositiveNumber);
  app.add_option("--threads", config.threads, "publish's gather threads (0: chosen from the size)");
  app.add_flag("--csv", csv, "print CSV instead of a table");
  CLI11_PARSE(app, argc, argv);
  bench::Table table({"operation", "MiB", "per_call", "GB/s", "vs_memcpy", "goal"}, csv);
  int status = 0;
  try {
    run(config, table);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_weights: %s\n", e.what());
    status = 1;
  }
  table.print();
  return status;
}
