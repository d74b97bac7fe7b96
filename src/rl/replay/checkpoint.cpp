#include "rl/replay/checkpoint.hpp"

#include <atomic>
#include <cstring>
#include <vector>

#include "core/text_format.hpp"
#include "memmap/memmap_publish.hpp"
#include "rl/replay/priority_trees.hpp"
#include "tensortree/error.hpp"
#include "tensortree/memmap.hpp"

namespace tensortree::detail {

namespace fs = std::filesystem;

namespace {

ReplayBufferOptions options_of(const ControlBlock& control) {
  return {control.capacity(), control.tree_leaves() != 0, control.alpha(), control.eps(), control.limits()};
}

// Copies row `row` of every leaf under its seqlock; the sequence number to keep for it in the
// copy, or 0 (never written) when it was unpublished or changed during the copy.
std::uint64_t copy_row(const ControlBlock& control, const RowStore& store, const std::vector<std::byte*>& targets,
                       std::int64_t row) {
  const std::uint64_t seq = control.seq(row).load(std::memory_order_acquire);
  if (!is_published(seq)) return 0;
  for (std::size_t leaf = 0; leaf < targets.size(); ++leaf) {
    const std::uint64_t bytes = store.layout().row_bytes(leaf);
    std::memcpy(targets[leaf] + static_cast<std::uint64_t>(row) * bytes,
                store.base(leaf) + static_cast<std::uint64_t>(row) * bytes, bytes);
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return control.seq(row).load(std::memory_order_relaxed) == seq ? seq : 0;
}

// Priorities of the rows kept, under the lock; the copy's trees are rebuilt from them.
void copy_priorities(const ControlBlock& control, const ControlBlock& copy, std::chrono::milliseconds timeout) {
  const PriorityTrees live(control, timeout);
  PriorityTrees trees(copy, timeout);
  copy.header().max_priority = control.header().max_priority;
  for (std::int64_t row = 0; row < control.capacity(); ++row) {
    if (is_published(copy.seq(row).load())) trees.set(row, live.leaf(row));
  }
}

std::vector<fs::path> everything_under(const fs::path& dir) {
  std::vector<fs::path> paths{dir};
  for (const auto& entry : fs::recursive_directory_iterator(dir)) paths.push_back(entry.path());
  return paths;
}

}  // namespace

CheckpointInfo write_checkpoint(const ControlBlock& control, const RowStore& store, const fs::path& target_dir,
                                const CheckpointOptions& options, std::chrono::milliseconds timeout) {
  CheckpointInfo info;
  const fs::path target = normalized_target(target_dir);
  check_target(target, MemmapOverwrite::Replace);
  fs::create_directories(target.parent_path());
  remove_stale_temps(target);
  const TempDirGuard temp(temp_sibling(target));
  // The rows are laid out in a folder of the temporary directory, so that whatever a killed
  // checkpoint leaves is under one name remove_stale_temps() knows, and moved up when written.
  fs::create_directory(temp.path());
  const TensorTree rows = store.tree().memmap_like(temp.path() / "rows", {.durable = false});
  std::vector<std::byte*> targets;
  const Schema& schema = store.layout().row_schema();
  for (std::size_t i = 0; i < schema.leaves().size(); ++i) {
    targets.push_back(static_cast<std::byte*>(rows.get(schema.leaf_path(i)).data_ptr()));
  }
  const ControlBlock copy = ControlBlock::create(temp.path(), options_of(control));
  for (std::int64_t row = 0; row < control.capacity(); ++row) {
    const std::uint64_t seq = copy_row(control, store, targets, row);
    copy.seq(row).store(seq);
    info.rows += seq != 0 ? 1 : 0;
  }
  if (control.tree_leaves() != 0) copy_priorities(control, copy, timeout);
  // Noted after the copy, so every ticket in it is below the cursor (a later claim of a row must
  // find an older ticket there), and together, so the copy's limiter resumes from the same counts.
  info.inserted = control.cursor().load(std::memory_order_acquire);
  info.sampled = control.samples().load(std::memory_order_acquire);
  copy.cursor().store(info.inserted);
  copy.samples().store(info.sampled);
  copy.header().layout_fingerprint = store.layout().fingerprint();
  copy.header().layout_state = static_cast<std::uint32_t>(LayoutState::Ready);
  move_tree_into(temp.path() / "rows", temp.path());
  if (options.durable) fsync_all(everything_under(temp.path()));
  publish(temp.path(), target, MemmapOverwrite::Replace);
  if (options.durable) fsync_directory(target.parent_path());
  return info;
}

}  // namespace tensortree::detail
