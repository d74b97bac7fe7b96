// The replay buffer against the floors plain memory sets, each baseline measured in the same run:
//   extend of a trajectory         vs one memcpy of its bytes into a ring of the same size
//   extend of 64-byte rows         the cost per row, one row per call and 256 per call
//   sample(256) uniform            vs memcpy of the same 256 rows gathered from a plain array
//   prioritized draw of 256 rows   from 10^6 rows (the sum tree alone), and the whole sample(256)
// Every sampled row is checked against the step that wrote it; exits 1 when one differs.
//
//   bench_replay [--quick] [--dir /dev/shm] [--csv]
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "rl/replay/control_block.hpp"
#include "rl/replay/priority_trees.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;
namespace fs = std::filesystem;

namespace {

struct Config {
  bool quick = false;
  fs::path dir;
};

constexpr std::int64_t kObsBytes = 3 * 64 * 64;

std::uint8_t obs_byte(std::int64_t step, std::int64_t e) { return static_cast<std::uint8_t>((step * 7 + e) % 251); }

// `k` steps of 3x64x64 uint8 observations (and the step number), first step `first`.
TensorTree observations(std::int64_t first, std::int64_t k) {
  Tensor obs = Tensor::empty({k, 3, 64, 64}, {DType::UInt8});
  Tensor step = Tensor::empty({k}, {DType::Int64});
  for (std::int64_t i = 0; i < k; ++i) {
    step.data<std::int64_t>()[i] = first + i;
    for (std::int64_t e = 0; e < kObsBytes; ++e) obs.data<std::uint8_t>()[i * kObsBytes + e] = obs_byte(first + i, e);
  }
  TensorTree tree(Shape{k});
  tree.set("obs", obs);
  tree.set("step", step);
  return tree;
}

void check_rows(const ReplaySample& s) {
  const auto* obs = s.batch.get("obs").data<std::uint8_t>();
  const auto* step = s.batch.get("step").data<std::int64_t>();
  for (std::int64_t i = 0; i < s.batch.batch_size()[0]; ++i) {
    for (std::int64_t e = 0; e < kObsBytes; ++e) {
      if (obs[i * kObsBytes + e] != obs_byte(step[i], e)) {
        throw CorruptData("bench_replay: sampled row " + std::to_string(i) + " (step " + std::to_string(step[i]) +
                          ") differs from what extend wrote");
      }
    }
  }
}

class Scratch {
 public:
  explicit Scratch(fs::path path) : path_(std::move(path)) { fs::remove_all(path_); }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The best of several short rounds: on a shared machine the best round saw the least of the load.
template <class Fn>
double best_time(Fn&& fn) {
  constexpr int kRounds = 5;
  double best = 1e30;
  for (int round = 0; round < kRounds; ++round) best = std::min(best, bench::time_per_call(fn, 0.05));
  return best;
}

// The replay operation and its baseline timed in alternation, the best round of each, so that the
// two see the same load.
template <class Replay, class Baseline>
std::pair<double, double> timed_pair(Replay&& replay, Baseline&& baseline) {
  constexpr int kRounds = 5;
  double best_replay = 1e30, best_baseline = 1e30;
  for (int round = 0; round < kRounds; ++round) {
    best_replay = std::min(best_replay, bench::time_per_call(replay, 0.05));
    best_baseline = std::min(best_baseline, bench::time_per_call(baseline, 0.05));
  }
  return {best_replay, best_baseline};
}

std::string ratio_cell(double baseline_s, double replay_s) { return bench::fixed(baseline_s / replay_s, 2) + "x"; }

// extend of a 3 MB trajectory (256 steps) into a ring of `laps` trajectories, against memcpy of
// the same bytes into a plain ring of the same size.
void bench_extend_trajectory(const Config& config, bench::Table& table) {
  const std::int64_t steps = 256, laps = config.quick ? 4 : 16;
  const Scratch dir(config.dir / "trajectory");
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = steps * laps});
  const TensorTree trajectory = observations(0, steps);
  for (std::int64_t i = 0; i < laps; ++i) rb.extend(trajectory);  // every page of the ring mapped
  const std::size_t bytes = static_cast<std::size_t>(steps) * (kObsBytes + 8);
  std::vector<std::uint8_t> ring(bytes * static_cast<std::size_t>(laps), 1), source(bytes, 2);
  std::size_t slot = 0;
  const auto [t_extend, t_copy] = timed_pair([&] { rb.extend(trajectory); },
                                             [&] {
                                               std::memcpy(ring.data() + slot * bytes, source.data(), bytes);
                                               slot = (slot + 1) % static_cast<std::size_t>(laps);
                                             });
  table.add({"extend 3 MB trajectory", bench::fixed(bytes / 1048576.0, 2) + " MiB", bench::fixed(t_extend * 1e6, 1) + " us",
             bench::fixed(t_copy * 1e6, 1) + " us", ratio_cell(t_copy, t_extend), ">= 0.8x"});
}

// extend of 64-byte rows (one float32[16] leaf), one per call and 256 per call.
void bench_extend_rows(const Config& config, bench::Table& table) {
  const Scratch dir(config.dir / "rows");
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 1 << 16});
  const TensorTree one(Shape{1}, {{"x", Tensor::arange({1, 16})}});
  const TensorTree many(Shape{256}, {{"x", Tensor::arange({256, 16})}});
  for (int i = 0; i < 256; ++i) rb.extend(many);  // the ring mapped
  // Calls timed 1000 at a time: the clock costs as much as what is timed.
  constexpr int kCalls = 1000;
  std::vector<std::uint8_t> ring(std::size_t{64} << 16), row(64, 3);
  std::size_t slot = 0;
  const auto copy_rows = [&] {
    for (int i = 0; i < kCalls; ++i) {
      std::memcpy(ring.data() + slot * 64, row.data(), 64);
      slot = (slot + 1) & 0xffff;
    }
  };
  const auto [t_one_calls, t_copy_calls] = timed_pair(
      [&] {
        for (int i = 0; i < kCalls; ++i) rb.extend(one);
      },
      copy_rows);
  const double t_one = t_one_calls / kCalls, t_copy = t_copy_calls / kCalls;
  const double t_many = timed_pair([&] { rb.extend(many); }, copy_rows).first / 256;
  table.add({"extend 64-byte row, 1/call", "64 B", bench::fixed(t_one * 1e9, 0) + " ns", bench::fixed(t_copy * 1e9, 0) + " ns",
             "overhead " + bench::fixed((t_one - t_copy) * 1e6, 3) + " us/row", "<= 1 us/row"});
  table.add({"extend 64-byte rows, 256/call", "16 KiB", bench::fixed(t_many * 1e9, 0) + " ns/row",
             bench::fixed(t_copy * 1e9, 0) + " ns", "overhead " + bench::fixed((t_many - t_copy) * 1e6, 3) + " us/row",
             "<= 1 us/row"});
}

// sample(256) of 3x64x64 uint8 rows from a big buffer, against memcpy of the same 256 rows from a
// plain array into one buffer.
void bench_sample_uniform(const Config& config, bench::Table& table) {
  const std::int64_t rows = config.quick ? 1024 : 16384;
  const Scratch dir(config.dir / "uniform");
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = rows}, {.seed = 1});
  for (std::int64_t i = 0; i < rows; i += 256) rb.extend(observations(i, 256));
  ReplaySample s = rb.sample(256);
  check_rows(s);
  std::vector<std::uint8_t> plain(static_cast<std::size_t>(rows * kObsBytes), 5), out(256 * kObsBytes);
  std::mt19937_64 rng(2);
  std::vector<std::int64_t> index(256);
  const auto gather_plain = [&] {
    for (auto& i : index) i = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
    for (std::size_t i = 0; i < index.size(); ++i) {
      std::memcpy(out.data() + i * kObsBytes, plain.data() + index[i] * kObsBytes, kObsBytes);
    }
  };
  // A learner that drops each batch before the next: the handle gathers into the same buffer.
  const auto [t_sample, t_copy] = timed_pair(
      [&] {
        const ReplaySample batch = rb.sample(256);
        if (batch.indices.size() != 256) throw CorruptData("bench_replay: short sample");
      },
      gather_plain);
  // One that keeps the previous batch while it samples: a new buffer each time.
  const double t_kept = timed_pair([&] { s = rb.sample(256); }, gather_plain).first;
  check_rows(s);
  const std::string size = std::to_string(rows) + " rows, 3 MiB out";
  table.add({"sample(256) uniform", size, bench::fixed(t_sample * 1e6, 1) + " us", bench::fixed(t_copy * 1e6, 1) + " us",
             ratio_cell(t_copy, t_sample), ">= 0.7x"});
  table.add({"sample(256) uniform, batch kept", size, bench::fixed(t_kept * 1e6, 1) + " us",
             bench::fixed(t_copy * 1e6, 1) + " us", ratio_cell(t_copy, t_kept), "-"});
}

// sample(256) from a prioritized buffer of 10^6 rows with random priorities (rows of one int64).
void bench_sample_prioritized(const Config& config, bench::Table& table) {
  const std::int64_t rows = config.quick ? 10000 : 1000000;
  const Scratch dir(config.dir / "prioritized");
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = rows, .prioritized = true},
                                         {.sampler = SamplerKind::Prioritized, .seed = 3});
  constexpr std::int64_t kChunk = 10000;
  std::mt19937_64 rng(4);
  std::vector<std::int64_t> index(kChunk);
  std::vector<double> priority(kChunk);
  for (std::int64_t first = 0; first < rows; first += kChunk) {
    rb.extend(TensorTree(Shape{kChunk}, {{"step", Tensor::arange({kChunk}, static_cast<double>(first), 1, {DType::Int64})}}));
    for (std::int64_t i = 0; i < kChunk; ++i) {
      index[static_cast<std::size_t>(i)] = first + i;
      priority[static_cast<std::size_t>(i)] = std::uniform_real_distribution<double>(0.01, 10.0)(rng);
    }
    rb.update_priority(index, priority);
  }
  ReplaySample s = rb.sample(256);
  const StoragePtr reuse = s.batch.storage();
  const double t = best_time([&] { s = rb.sample(256, {.reuse = reuse}); });
  for (std::size_t i = 0; i < 256; ++i) {
    if (s.batch.get("step").data<std::int64_t>()[i] != s.indices[i]) throw CorruptData("bench_replay: prioritized row differs");
  }
  // The draw alone: the lock, 256 masses and the descents, as the Prioritized sampler makes them.
  const detail::ControlBlock control = detail::ControlBlock::open(dir.path());
  std::vector<double> masses(256);
  std::vector<std::int64_t> drawn(256);
  const double t_draw = best_time([&] {
    const detail::PriorityTrees trees(control, std::chrono::milliseconds(1000));
    std::uniform_real_distribution<double> mass(0.0, trees.total());
    for (double& m : masses) m = mass(rng);
    trees.find_all(masses, drawn);
  });
  for (const std::int64_t row : drawn) {
    if (row < 0 || row >= rows) throw CorruptData("bench_replay: the sum tree drew no row");
  }
  table.add({"prioritized draw of 256", std::to_string(rows) + " rows", bench::fixed(t_draw * 1e6, 1) + " us", "-", "-",
             "<= 20 us"});
  table.add({"sample(256) prioritized", std::to_string(rows) + " rows", bench::fixed(t * 1e6, 1) + " us", "-", "-",
             "-"});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ReplayBuffer extend and sample against memcpy"};
  Config config;
  std::string dir = fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
  bool csv = false;
  app.add_flag("--quick", config.quick, "small buffers (CI's run: timings mean little)");
  app.add_option("--dir", dir, "where the buffers live (a tmpfs keeps them in memory)");
  app.add_flag("--csv", csv, "print CSV instead of a table");
  CLI11_PARSE(app, argc, argv);
  config.dir = fs::path(dir) / ("bench_replay_" + std::to_string(::getpid()));
  const Scratch root(config.dir);
  fs::create_directories(config.dir);
  try {
    bench::Table table({"case", "size", "replay", "baseline", "ratio", "goal"}, csv);
    bench_extend_trajectory(config, table);
    bench_extend_rows(config, table);
    bench_sample_uniform(config, table);
    bench_sample_prioritized(config, table);
    table.print();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_replay: %s\n", e.what());
    return 1;
  }
  return 0;
}
