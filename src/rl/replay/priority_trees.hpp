// The priorities of a prioritized buffer: a sum tree (drawing row i with probability p_i / sum p)
// and a min tree (the smallest priority, for importance weights) over the rows, both in the
// control block, changed only under its priority lock. A min-tree entry of 0 means "no row":
// an unpublished row has priority 0 and is never drawn.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <span>

#include "rl/replay/control_block.hpp"
#include "rl/replay/process_lock.hpp"

namespace tensortree::detail {

// Holds the priority lock for its lifetime; a holder that died mid-update is repaired by
// rebuilding the inner nodes from the leaves.
class PriorityTrees {
 public:
  PriorityTrees(const ControlBlock& control, std::chrono::milliseconds timeout);

  // Priority of a row as stored: (p + eps)^alpha.
  double stored(double priority) const;
  // The stored priority of a new row: that of the largest priority given so far (1 before any).
  double default_priority() const;
  // Sets the stored priority of `row` (0: never drawn).
  void set(std::int64_t row, double stored_priority);
  // update_priority(): raw priorities, which also raise the running maximum.
  void update(std::int64_t row, double priority);
  double total() const { return sum_[1]; }
  // The row holding prefix mass `mass` (in [0, total)); -1 when the trees are inconsistent.
  std::int64_t find(double mass) const;
  // find() for many masses at once, level by level: each level's loads are prefetched together,
  // so the cache misses of a deep tree overlap instead of adding up. `masses` is overwritten.
  void find_all(std::span<double> masses, std::span<std::int64_t> rows) const;
  double leaf(std::int64_t row) const { return sum_[leaves_ + static_cast<std::uint64_t>(row)]; }
  // The smallest non-zero stored priority, 0 when no row has one.
  double min() const { return min_[1]; }

 private:
  void rebuild();
  void refresh(std::uint64_t node);

  const ControlBlock& control_;
  ProcessLock lock_;
  std::uint64_t leaves_;
  double* sum_;
  double* min_;
};

}  // namespace tensortree::detail
