#include "rl/replay/row_store.hpp"

#include <unistd.h>

#include <atomic>
#include <system_error>

#include "core/text_format.hpp"
#include "memmap/memmap_meta.hpp"
#include "rl/replay/process_lock.hpp"
#include "tensortree/error.hpp"
#include "tensortree/memmap.hpp"

namespace tensortree::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kLayoutTemp = ".layout";

// Everything in the buffer's directory but its control block: a creator that died left it.
void remove_leftovers(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename() != kControlFileName) fs::remove_all(entry.path());
  }
}

LayoutState layout_state(const ControlBlock& control) {
  return static_cast<LayoutState>(std::atomic_ref(control.header().layout_state).load(std::memory_order_acquire));
}

}  // namespace

void move_tree_into(const fs::path& from, const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(from)) {
    if (entry.path().filename() != kMetaFileName) fs::rename(entry.path(), dir / entry.path().filename());
  }
  fs::rename(from / kMetaFileName, dir / kMetaFileName);
  fs::remove(from);
}

RowStore::RowStore(TensorTree tree, RowLayout layout) : tree_(std::move(tree)), layout_(std::move(layout)) {
  bases_.resize(layout_.leaf_count());
  for (std::size_t i = 0; i < bases_.size(); ++i) {
    const Tensor& leaf = tree_.get(layout_.row_schema().leaf_path(i));
    bases_[i] = static_cast<std::byte*>(leaf.data_ptr());
  }
  tree_.for_each_leaf([&](const Path& path, const Tensor&) {
    depth_first_.push_back(static_cast<std::size_t>(layout_.find(path)));
  });
}

RowStore RowStore::open(const fs::path& dir, const ControlBlock& control) {
  TensorTree tree = TensorTree::load_memmap(dir, {.mode = MemmapMode::ReadWrite});
  const std::int64_t capacity = control.capacity();
  if (tree.batch_dims() < 1 || tree.batch_size()[0] != capacity) {
    throw CorruptData(fmt::format("replay buffer '{}': the rows have batch_size {}, the control block a capacity of {}",
                                  dir.string(), tree.batch_size(), capacity));
  }
  RowLayout layout = RowLayout::of(tree, "ReplayBuffer::open");
  const std::uint64_t recorded = std::atomic_ref(control.header().layout_fingerprint).load();
  if (layout.fingerprint() != recorded) {
    throw SchemaMismatch(fmt::format("replay buffer '{}': the rows have layout {:016x}, the control block records "
                                     "{:016x} (another tree was saved there)",
                                     dir.string(), layout.fingerprint(), recorded));
  }
  return RowStore(std::move(tree), std::move(layout));
}

RowStore RowStore::create_or_open(const fs::path& dir, ControlBlock& control, const TensorTree& rows,
                                  std::chrono::milliseconds timeout) {
  const RowLayout layout = RowLayout::of(rows, "ReplayBuffer::extend");
  const ProcessLock lock(control.header().layout_lock, timeout, "ReplayBuffer::extend: laying out the rows");
  if (layout_state(control) != LayoutState::Ready) {
    remove_leftovers(dir);
    const fs::path temp = dir / kLayoutTemp;
    (void)empty_memmap(temp, rows, Shape{control.capacity()}, {.durable = false});
    move_tree_into(temp, dir);
    std::atomic_ref(control.header().layout_fingerprint).store(layout.fingerprint());
    std::atomic_ref(control.header().layout_state).store(static_cast<std::uint32_t>(LayoutState::Ready),
                                                         std::memory_order_release);
  }
  return open(dir, control);
}

}  // namespace tensortree::detail
