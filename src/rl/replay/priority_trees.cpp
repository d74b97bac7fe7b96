#include "rl/replay/priority_trees.hpp"

#include <algorithm>
#include <cmath>

namespace tensortree::detail {

namespace {

// The smaller of two priorities, 0 standing for "none".
double min_present(double a, double b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

PriorityTrees::PriorityTrees(const ControlBlock& control, std::chrono::milliseconds timeout)
    : control_(control),
      lock_(control.header().priority_lock, timeout, "ReplayBuffer priorities"),
      leaves_(control.tree_leaves()),
      sum_(control.sum_tree()),
      min_(control.min_tree()) {
  if (lock_.recovered()) rebuild();
}

double PriorityTrees::stored(double priority) const {
  return std::pow(priority + control_.eps(), control_.alpha());
}

double PriorityTrees::default_priority() const {
  const double max = control_.header().max_priority;
  return stored(std::isfinite(max) && max > 0 ? max : 1.0);
}

void PriorityTrees::refresh(std::uint64_t node) {
  sum_[node] = sum_[2 * node] + sum_[2 * node + 1];
  min_[node] = min_present(min_[2 * node], min_[2 * node + 1]);
}

void PriorityTrees::set(std::int64_t row, double stored_priority) {
  std::uint64_t node = leaves_ + static_cast<std::uint64_t>(row);
  sum_[node] = stored_priority;
  min_[node] = stored_priority;
  for (node /= 2; node >= 1; node /= 2) refresh(node);
}

void PriorityTrees::update(std::int64_t row, double priority) {
  double& max = control_.header().max_priority;
  if (!(max >= priority)) max = priority;  // also replaces a NaN left in the block
  set(row, stored(priority));
}

std::int64_t PriorityTrees::find(double mass) const {
  std::uint64_t node = 1;
  while (node < leaves_) {
    const double left = sum_[2 * node];
    if (mass < left) {
      node = 2 * node;
    } else {
      mass -= left;
      node = 2 * node + 1;
    }
  }
  const auto row = static_cast<std::int64_t>(node - leaves_);
  return row < control_.capacity() && sum_[node] > 0 ? row : -1;
}

void PriorityTrees::find_all(std::span<double> masses, std::span<std::int64_t> rows) const {
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = 1;  // every descent starts at the root
  for (std::uint64_t width = 1; width < leaves_; width *= 2) {
    // Branch-free: which child a random mass goes to is a coin flip no predictor guesses.
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto node = static_cast<std::uint64_t>(rows[i]);
      const double left = sum_[2 * node];
      const bool right = !(masses[i] < left);
      masses[i] -= left * static_cast<double>(right);
      const std::uint64_t child = 2 * node + static_cast<std::uint64_t>(right);
      if (2 * width < leaves_) __builtin_prefetch(&sum_[2 * child]);
      rows[i] = static_cast<std::int64_t>(child);
    }
  }
  for (std::int64_t& row : rows) {
    const auto node = static_cast<std::uint64_t>(row);
    row = node - leaves_ < static_cast<std::uint64_t>(control_.capacity()) && sum_[node] > 0
              ? static_cast<std::int64_t>(node - leaves_)
              : -1;
  }
}

void PriorityTrees::rebuild() {
  for (std::uint64_t i = leaves_; i < 2 * leaves_; ++i) {
    // Garbage a dying writer may have left (a half-written double is still a double, maybe NaN).
    if (!(sum_[i] >= 0) || !std::isfinite(sum_[i])) sum_[i] = 0;
    min_[i] = sum_[i];
  }
  for (std::uint64_t node = leaves_ - 1; node >= 1; --node) refresh(node);
}

}  // namespace tensortree::detail
