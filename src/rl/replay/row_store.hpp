// The rows of a replay buffer: a memmap tree of batch_size {capacity} in the buffer's directory,
// in TensorDict's layout, mapped read-write by every process. The first extend creates it (one
// process, under the control block's layout lock); the others map what it made.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <vector>

#include "rl/replay/control_block.hpp"
#include "rl/replay/row_layout.hpp"
#include "tensortree/tree.hpp"

namespace tensortree::detail {

// Moves the memmap tree laid out in `from` into `dir` (beside what `dir` holds), meta.json last:
// until it arrives nothing in `dir` looks like a memmap tree. `from` is removed.
void move_tree_into(const std::filesystem::path& from, const std::filesystem::path& dir);

class RowStore {
 public:
  // Maps the rows of a buffer whose layout is ready. CorruptData when the directory is damaged or
  // holds another number of rows, SchemaMismatch when its layout is not the one the control
  // block records.
  static RowStore open(const std::filesystem::path& dir, const ControlBlock& control);
  // Lays out the rows for `rows`' structure unless another process already has, then maps them.
  // A creator that died half-way is replaced (its leftovers removed); a live one is waited for,
  // at most `timeout`.
  static RowStore create_or_open(const std::filesystem::path& dir, ControlBlock& control, const TensorTree& rows,
                                 std::chrono::milliseconds timeout);

  const RowLayout& layout() const { return layout_; }
  const TensorTree& tree() const { return tree_; }
  // Row 0 of leaf `leaf` (layout order); row r is at base + r * layout().row_bytes(leaf).
  std::byte* base(std::size_t leaf) const { return bases_[leaf]; }
  // The layout index of the storage tree's leaves in depth-first (insertion) order: a tree built
  // like the first one visits its leaves in this order.
  const std::vector<std::size_t>& depth_first_order() const { return depth_first_; }

 private:
  RowStore(TensorTree tree, RowLayout layout);

  TensorTree tree_;
  RowLayout layout_;
  std::vector<std::byte*> bases_;
  std::vector<std::size_t> depth_first_;
};

}  // namespace tensortree::detail
