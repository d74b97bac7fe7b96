// Many writer processes extend one replay buffer while this process samples it: every sampled row
// is checked while the writers run, and at the end every row written must be in the buffer, whole,
// exactly once (the ring holds them all). Prints one table row; exits 1 on a torn, lost or
// duplicated row.
//
//   stress_replay [--writers 4] [--rows 250000] [--dir /dev/shm] [--csv]    (10^6 rows by default)
#include <CLI/CLI.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kPayload = 56;  // with the int64 step: 64-byte rows
constexpr std::int64_t kStride = std::int64_t{1} << 32;

std::uint8_t payload_byte(std::int64_t step, std::int64_t e) { return static_cast<std::uint8_t>((step * 31 + e * 7) % 253 + 1); }

TensorTree rows_of(std::int64_t first, std::int64_t k) {
  Tensor step = Tensor::empty({k}, {DType::Int64});
  Tensor payload = Tensor::empty({k, kPayload}, {DType::UInt8});
  for (std::int64_t i = 0; i < k; ++i) {
    step.data<std::int64_t>()[i] = first + i;
    for (std::int64_t e = 0; e < kPayload; ++e) payload.data<std::uint8_t>()[i * kPayload + e] = payload_byte(first + i, e);
  }
  TensorTree tree(Shape{k});
  tree.set("step", step);
  tree.set("payload", payload);
  return tree;
}

bool row_whole(const std::int64_t* step, const std::uint8_t* payload, std::int64_t i) {
  for (std::int64_t e = 0; e < kPayload; ++e) {
    if (payload[i * kPayload + e] != payload_byte(step[i], e)) return false;
  }
  return true;
}

// Writer w: rows w * kStride + 0.., in extends of 1..64 rows (prebuilt, so the loop measures extend).
[[noreturn]] void writer(const fs::path& dir, int w, std::int64_t rows) {
  int code = 0;
  try {
    ReplayBuffer rb = ReplayBuffer::open(dir);
    for (std::int64_t i = 0; i < rows;) {
      const std::int64_t k = std::min<std::int64_t>(1 + (i * 7 + w) % 64, rows - i);
      rb.extend(rows_of(w * kStride + i, k));
      i += k;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "writer %d: %s\n", w, e.what());
    code = 1;
  }
  ::_exit(code);
}

struct Counts {
  std::int64_t sampled = 0;
  std::int64_t torn = 0;
  std::int64_t lost = 0;
  std::int64_t duplicated = 0;
};

void check_sample(const ReplaySample& s, Counts& counts) {
  const auto* step = s.batch.get("step").data<std::int64_t>();
  const auto* payload = s.batch.get("payload").data<std::uint8_t>();
  for (std::int64_t i = 0; i < s.batch.batch_size()[0]; ++i) counts.torn += row_whole(step, payload, i) ? 0 : 1;
  counts.sampled += s.batch.batch_size()[0];
}

// Every row of every writer once, whole.
void check_storage(ReplayBuffer& rb, int writers, std::int64_t rows, Counts& counts) {
  const TensorTree& storage = rb.storage();
  const auto* step = storage.get("step").data<std::int64_t>();
  const auto* payload = storage.get("payload").data<std::uint8_t>();
  std::vector<std::vector<char>> seen(static_cast<std::size_t>(writers), std::vector<char>(static_cast<std::size_t>(rows)));
  for (std::int64_t i = 0; i < rb.capacity(); ++i) {
    const std::int64_t w = step[i] / kStride, r = step[i] % kStride;
    if (w < 0 || w >= writers || r < 0 || r >= rows || !row_whole(step, payload, i)) {
      ++counts.torn;
      continue;
    }
    char& mark = seen[static_cast<std::size_t>(w)][static_cast<std::size_t>(r)];
    counts.duplicated += mark;
    mark = 1;
  }
  for (const auto& marks : seen) {
    for (const char mark : marks) counts.lost += mark ? 0 : 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ReplayBuffer with many writer processes and a checking sampler"};
  int writers = 4;
  std::int64_t rows = 250000;
  std::string dir_name = fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
  bool csv = false;
  app.add_option("--writers", writers, "writer processes")->check(CLI::Range(1, 64));
  app.add_option("--rows", rows, "rows per writer")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir_name, "where the buffer lives");
  app.add_flag("--csv", csv, "print CSV instead of a table");
  CLI11_PARSE(app, argc, argv);
  const fs::path dir = fs::path(dir_name) / ("stress_replay_" + std::to_string(::getpid()));
  Counts counts;
  double seconds = 0;
  try {
    ReplayBuffer rb = ReplayBuffer::create(dir, {.capacity = writers * rows}, {.seed = 1});
    const auto start = std::chrono::steady_clock::now();
    std::vector<pid_t> children;
    for (int w = 0; w < writers; ++w) {
      const pid_t pid = ::fork();
      if (pid == 0) writer(dir, w, rows);
      children.push_back(pid);
    }
    const std::uint64_t total = static_cast<std::uint64_t>(writers * rows);
    while (!rb.has_layout() || rb.inserted() < total) {
      if (rb.has_layout() && rb.size() > 0) check_sample(rb.sample(256), counts);
      else ::usleep(1000);
    }
    int failed = 0;
    for (const pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (failed != 0) throw Error(std::to_string(failed) + " writer(s) failed");
    check_storage(rb, writers, rows, counts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stress_replay: %s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  bench::Table table({"writers", "rows", "seconds", "inserts/s", "rows sampled", "torn", "lost", "duplicated"}, csv);
  table.add({std::to_string(writers), std::to_string(writers * rows), bench::fixed(seconds, 2),
             bench::fixed(static_cast<double>(writers * rows) / seconds, 0), std::to_string(counts.sampled),
             std::to_string(counts.torn), std::to_string(counts.lost), std::to_string(counts.duplicated)});
  table.print();
  return counts.torn + counts.lost + counts.duplicated == 0 ? 0 : 1;
}
