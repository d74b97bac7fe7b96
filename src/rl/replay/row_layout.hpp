// The layout of one row of a replay buffer: a tree's structure with its leading batch dimension
// taken off every node and leaf. Its schema's fingerprint names the layout in the control block;
// the same structure with n rows in front lays out a sampled batch.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"

namespace tensortree::detail {

class RowLayout {
 public:
  // From a tree whose root has exactly one batch dimension (rows); InvalidArgument naming `op`
  // otherwise.
  static RowLayout of(const TensorTree& rows, std::string_view op);

  // One row on the CPU; leaves in layout order (the order every per-leaf table here uses).
  const Schema& row_schema() const { return *row_schema_; }
  std::uint64_t fingerprint() const { return row_schema_->fingerprint(); }
  std::size_t leaf_count() const { return row_schema_->leaves().size(); }
  std::uint64_t row_bytes(std::size_t leaf) const { return row_schema_->leaves()[leaf].nbytes; }
  // Leaf `leaf`'s index in layout order for the leaf at `path`, or -1.
  std::int64_t find(const Path& path) const;
  // n rows of this layout, consolidated on `device`; cached per (n, device).
  std::shared_ptr<const Schema> batch_schema(std::int64_t n, DeviceType device) const;

 private:
  RowLayout(std::vector<NodeSpec> nodes, std::vector<LeafPlan> leaves);

  std::vector<NodeSpec> nodes_;   // batch sizes without the row dimension
  std::vector<LeafPlan> leaves_;  // shapes without the row dimension
  std::shared_ptr<const Schema> row_schema_;
  // A sampler asks for a few batch sizes again and again; older entries go when it asks for many.
  static constexpr std::size_t kCachedBatches = 8;
  mutable std::vector<std::pair<std::pair<std::int64_t, DeviceType>, std::shared_ptr<const Schema>>> batches_;
};

}  // namespace tensortree::detail
