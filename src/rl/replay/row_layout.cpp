#include "rl/replay/row_layout.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

Shape without_row(const Shape& shape) { return Shape(std::vector<std::int64_t>(shape.begin() + 1, shape.end())); }

Shape with_rows(std::int64_t n, const Shape& row) {
  std::vector<std::int64_t> out{n};
  out.insert(out.end(), row.begin(), row.end());
  return Shape(std::move(out));
}

}  // namespace

RowLayout::RowLayout(std::vector<NodeSpec> nodes, std::vector<LeafPlan> leaves)
    : nodes_(std::move(nodes)),
      leaves_(std::move(leaves)),
      row_schema_(std::make_shared<const Schema>(Schema::plan(nodes_, leaves_, DeviceType::CPU))) {}

RowLayout RowLayout::of(const TensorTree& rows, std::string_view op) {
  if (rows.batch_dims() != 1) {
    throw InvalidArgument(fmt::format("{}: the tree's batch_size {} must have exactly one dimension (rows)", op,
                                      rows.batch_size()));
  }
  std::vector<NodeSpec> nodes;
  rows.for_each_node([&](const Path& path, const TensorTree& node) {
    std::vector<std::string> keys;
    for (const Path& key : node.keys()) keys.push_back(key.front());
    nodes.push_back({path, without_row(node.batch_size()), std::move(keys)});
  });
  std::vector<LeafPlan> leaves;
  rows.for_each_leaf([&](const Path& path, const Tensor& leaf) {
    leaves.push_back({path, leaf.dtype(), without_row(leaf.shape())});
  });
  if (leaves.empty()) throw InvalidArgument(fmt::format("{}: the tree has no leaves", op));
  return RowLayout(std::move(nodes), std::move(leaves));
}

std::int64_t RowLayout::find(const Path& path) const {
  const LeafSpec* leaf = row_schema_->find_leaf(path);
  return leaf == nullptr ? -1 : leaf - row_schema_->leaves().data();
}

std::shared_ptr<const Schema> RowLayout::batch_schema(std::int64_t n, DeviceType device) const {
  const auto key = std::make_pair(n, device);
  for (const auto& [cached_key, schema] : batches_) {
    if (cached_key == key) return schema;
  }
  std::vector<NodeSpec> nodes = nodes_;
  for (NodeSpec& node : nodes) node.batch_size = with_rows(n, node.batch_size);
  std::vector<LeafPlan> leaves = leaves_;
  for (LeafPlan& leaf : leaves) leaf.shape = with_rows(n, leaf.shape);
  auto schema = std::make_shared<const Schema>(Schema::plan(std::move(nodes), std::move(leaves), device));
  if (batches_.size() >= kCachedBatches) batches_.erase(batches_.begin());
  batches_.emplace_back(key, schema);
  return schema;
}

}  // namespace tensortree::detail
