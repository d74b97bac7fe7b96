#include "rl/replay/row_writer.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/text_format.hpp"
#include "rl/replay/priority_trees.hpp"
#include "rl/replay/rate_limiter.hpp"
#include "rl/replay/replay_hooks.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

bool same_row_shape(const Shape& leaf_shape, const Shape& row_shape) {
  return leaf_shape.size() == row_shape.size() + 1 &&
         std::equal(row_shape.begin(), row_shape.end(), leaf_shape.begin() + 1);
}

}  // namespace

ReplayHooks& replay_hooks() {
  static ReplayHooks hooks;
  return hooks;
}

void RowWriter::check_leaf(const Path& path, const Tensor& leaf, std::size_t index, const RowStore& store) {
  const LeafSpec& spec = store.layout().row_schema().leaves()[index];
  if (leaf.dtype() != spec.dtype || !same_row_shape(leaf.shape(), spec.shape)) {
    throw SchemaMismatch(fmt::format("ReplayBuffer::extend: leaf '{}' is {} of shape {}; the buffer's rows hold {} "
                                     "of shape {} per row",
                                     path_str(path), leaf.dtype(), leaf.shape(), spec.dtype, spec.shape));
  }
  const Tensor* source = &leaf;
  if (leaf.device().is_cuda() || !leaf.is_contiguous()) {
    copies_.push_back(leaf.to(Device::cpu()).contiguous());
    source = &copies_.back();
  }
  sources_[index] = static_cast<const std::byte*>(source->data_ptr());
}

void RowWriter::match_by_path(const TensorTree& rows, const RowStore& store) {
  std::fill(sources_.begin(), sources_.end(), nullptr);
  rows.for_each_leaf([&](const Path& path, const Tensor& leaf) {
    const std::int64_t index = store.layout().find(path);
    if (index < 0) {
      throw SchemaMismatch(fmt::format("ReplayBuffer::extend: leaf '{}' is not in the buffer's layout", path_str(path)));
    }
    check_leaf(path, leaf, static_cast<std::size_t>(index), store);
  });
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i] == nullptr) {
      throw SchemaMismatch(fmt::format("ReplayBuffer::extend: the tree lacks leaf '{}' of the buffer's layout",
                                       path_str(store.layout().row_schema().leaf_path(i))));
    }
  }
}

void RowWriter::match(const TensorTree& rows, const RowStore& store) {
  rows_ = rows.batch_dims() == 1 ? rows.batch_size()[0] : -1;
  if (rows_ < 0) {
    throw InvalidArgument(fmt::format("ReplayBuffer::extend: the tree's batch_size {} must have one dimension (rows)",
                                      rows.batch_size()));
  }
  copies_.clear();
  sources_.assign(store.layout().leaf_count(), nullptr);
  // A tree built like the first one visits its leaves in the storage's depth-first order: then
  // each leaf is checked against the layout entry it should be, without a lookup.
  const auto& order = store.depth_first_order();
  const Schema& schema = store.layout().row_schema();
  std::size_t next = 0;
  bool in_order = true;
  rows.for_each_leaf([&](const Path& path, const Tensor& leaf) {
    if (!in_order) return;
    if (next >= order.size() || schema.leaf_path(order[next]) != path) {
      in_order = false;
      return;
    }
    check_leaf(path, leaf, order[next], store);
    ++next;
  });
  if (!in_order || next != order.size()) match_by_path(rows, store);
}

void RowWriter::write_run(const RowStore& store, std::int64_t first_row, std::int64_t source_row, std::int64_t count) {
  for (std::size_t leaf = 0; leaf < sources_.size(); ++leaf) {
    const std::uint64_t row_bytes = store.layout().row_bytes(leaf);
    std::memcpy(store.base(leaf) + static_cast<std::uint64_t>(first_row) * row_bytes,
                sources_[leaf] + static_cast<std::uint64_t>(source_row) * row_bytes,
                static_cast<std::uint64_t>(count) * row_bytes);
  }
}

void RowWriter::extend(const TensorTree& rows, const ControlBlock& control, const RowStore& store,
                       std::chrono::milliseconds timeout) {
  match(rows, store);
  if (rows_ == 0) return;
  const auto capacity = static_cast<std::uint64_t>(control.capacity());
  const auto k = static_cast<std::uint64_t>(rows_);
  const std::uint64_t first = reserve_inserts(control, k, timeout);
  // Only the last `capacity` rows of a longer tree survive; the earlier tickets are left unwritten.
  const std::uint64_t skip = k > capacity ? k - capacity : 0;
  tickets_.clear();
  for (std::uint64_t t = first + skip; t < first + k; ++t) {
    if (claim_row(control, t, timeout)) tickets_.push_back(t);
  }
  if (control.tree_leaves() != 0) set_priorities(control, timeout, false);
  if (replay_hooks().after_claim != nullptr && !tickets_.empty()) {
    replay_hooks().after_claim(static_cast<std::int64_t>(tickets_.front() % capacity),
                               static_cast<std::int64_t>(tickets_.size()));
  }
  // Runs of consecutive tickets on consecutive rows are copied with one memcpy per leaf.
  for (std::size_t i = 0; i < tickets_.size();) {
    std::size_t j = i + 1;
    while (j < tickets_.size() && tickets_[j] == tickets_[j - 1] + 1 && tickets_[j] % capacity != 0) ++j;
    write_run(store, static_cast<std::int64_t>(tickets_[i] % capacity), static_cast<std::int64_t>(tickets_[i] - first),
              static_cast<std::int64_t>(j - i));
    i = j;
  }
  for (const std::uint64_t t : tickets_) {
    std::uint64_t expected = writing_seq(t);
    // Fails only when another writer took the row over, believing this one dead: it is theirs now.
    control.seq(static_cast<std::int64_t>(t % capacity))
        .compare_exchange_strong(expected, published_seq(t), std::memory_order_release, std::memory_order_relaxed);
  }
  if (control.tree_leaves() != 0) set_priorities(control, timeout, true);
}

void RowWriter::set_priorities(const ControlBlock& control, std::chrono::milliseconds timeout, bool published) {
  if (tickets_.empty()) return;
  const auto capacity = static_cast<std::uint64_t>(control.capacity());
  PriorityTrees trees(control, timeout);
  // A claimed row is never drawn (priority 0) until it is published, at the largest priority so far.
  const double value = published ? trees.default_priority() : 0.0;
  for (const std::uint64_t t : tickets_) trees.set(static_cast<std::int64_t>(t % capacity), value);
}

}  // namespace tensortree::detail
