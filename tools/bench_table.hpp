// Shared by the benchmark programs: timing loops and a table printer that can also emit CSV.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tensortree/device.hpp"

namespace tensortree::bench {

// Runs `fn` until `min_seconds` have passed (at least `min_iters` times, at most `max_iters`)
// after `warmup` untimed runs; returns the mean seconds per call.
template <class Fn>
double time_per_call(Fn&& fn, double min_seconds = 0.25, int min_iters = 5, int max_iters = 100000,
                     int warmup = 2) {
  for (int i = 0; i < warmup; ++i) fn();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int iters = 0;
  double elapsed = 0;
  do {
    fn();
    ++iters;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while ((elapsed < min_seconds || iters < min_iters) && iters < max_iters);
  return elapsed / iters;
}

class Table {
 public:
  Table(std::vector<std::string> columns, bool csv) : columns_(std::move(columns)), csv_(csv) {}

  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  void print() const {
    if (csv_) {
      print_csv_row(columns_);
      for (const auto& row : rows_) print_csv_row(row);
      return;
    }
    std::vector<std::size_t> width(columns_.size());
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      width[c] = columns_[c].size();
      for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
    }
    print_aligned(columns_, width);
    for (const auto& row : rows_) print_aligned(row, width);
  }

 private:
  static void print_csv_row(const std::vector<std::string>& row) {
    for (std::size_t c = 0; c < row.size(); ++c) std::printf("%s%s", c ? "," : "", csv_field(row[c]).c_str());
    std::printf("\n");
  }
  // RFC 4180: a field holding a comma, quote or line break is quoted, its quotes doubled, so that
  // case names such as "extend 64-byte row, 1/call" stay one column in pandas and Python's csv.
  static std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (const char c : text) {
      if (c == '"') quoted += '"';
      quoted += c;
    }
    return quoted + '"';
  }
  static void print_aligned(const std::vector<std::string>& row, const std::vector<std::size_t>& width) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      std::printf("%*s%s", static_cast<int>(width[c]), row[c].c_str(), c + 1 < row.size() ? "  " : "\n");
    }
  }

  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
  bool csv_;
};

// The device named on the command line, or nullopt after saying so when it is a CUDA device this
// machine lacks: the caller then exits 77, which Meson reports as skipped.
inline std::optional<Device> measurable_device(const std::string& name) {
  const Device device = Device::parse(name);
  if (device.is_cuda() && cuda_device_count() == 0) {
    std::fprintf(stderr, "no CUDA device: nothing to measure on %s\n", name.c_str());
    return std::nullopt;
  }
  return device;
}

inline std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

}  // namespace tensortree::bench
