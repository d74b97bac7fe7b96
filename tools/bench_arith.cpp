// Element-wise arithmetic against the floor set by copying: add of two float32 tensors of --mib MiB
// each and a scalar multiply, timed in the same run as a memcpy of --mib MiB. Writing into an
// existing tensor (add_) compares with memcpy into an existing buffer; making a new tensor (a + b)
// with clone(), which pays the same first touch of fresh pages. bw_vs_base compares bandwidth
// (bytes read plus written per second: a copy moves 2 x MiB, a binary add 3 x MiB); time_vs_base
// compares wall time (above 1: faster than the copy). Prints a table (or CSV) and exits non-zero if
// a result is wrong.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

// Every element of a float32 tensor equals `expected`.
bool all_equal(const Tensor& t, float expected, const char* what) {
  const float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != expected) {
      std::fprintf(stderr, "%s: element %lld is %g, expected %g\n", what, static_cast<long long>(i), p[i], expected);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"element-wise add against memcpy of the same tensor size (CPU)"};
  bool csv = false;
  std::int64_t mib = 64;
  app.add_flag("--csv", csv, "print CSV instead of a table");
  app.add_option("--mib", mib, "size of each operand in MiB (CI uses a small size)")->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);

  const std::int64_t bytes = mib << 20;
  const std::int64_t n = bytes / 4;
  const Tensor a = Tensor::full({n}, 1.5);
  const Tensor b = Tensor::full({n}, 2.25);
  const Tensor acc = Tensor::full({n}, 0.0);
  std::vector<std::byte> src(static_cast<std::size_t>(bytes), std::byte{1});
  std::vector<std::byte> dst(static_cast<std::size_t>(bytes));

  bool ok = all_equal(a + b, 3.75f, "a + b") && all_equal(a * 2.0, 3.0f, "a * 2");
  acc.add_(b);
  ok = all_equal(acc, 2.25f, "add_") && ok;

  const double memcpy_s = bench::time_per_call([&] { std::memcpy(dst.data(), src.data(), dst.size()); });
  const double clone_s = bench::time_per_call([&] { (void)b.clone(); });
  struct Row {
    const char* op;
    int operands;  // tensors of `mib` MiB read plus written per call
    double seconds;
    bool new_tensor;  // compared with clone() rather than memcpy
  };
  const std::vector<Row> rows = {
      {"memcpy", 2, memcpy_s, false},
      {"add_ (in place)", 3, bench::time_per_call([&] { acc.add_(b); }), false},
      {"clone (new tensor)", 2, clone_s, true},
      {"a + b (new tensor)", 3, bench::time_per_call([&] { (void)(a + b); }), true},
      {"a * 2.0 (new tensor)", 2, bench::time_per_call([&] { (void)(a * 2.0); }), true},
  };
  bench::Table table({"op", "MiB", "us", "GB/s", "base", "bw_vs_base", "time_vs_base"}, csv);
  for (const Row& row : rows) {
    const double base_s = row.new_tensor ? clone_s : memcpy_s;
    const double bw = row.operands * static_cast<double>(bytes) / row.seconds;
    const double base_bw = 2.0 * static_cast<double>(bytes) / base_s;
    table.add({row.op, std::to_string(mib), fixed(row.seconds * 1e6, 1), fixed(bw / 1e9, 2),
               row.new_tensor ? "clone" : "memcpy", fixed(bw / base_bw, 2), fixed(base_s / row.seconds, 2)});
  }
  table.print();
  return ok ? 0 : 1;
}
