// TensorTree's reduce and all_reduce: every rank holds a tree of one layout (checked in one
// agreement round), packed into one buffer, reduced one dtype bucket at a time over dist_ops.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tree/consolidation_access.hpp"
#include "comm/agreement.hpp"
#include "comm/collective_check.hpp"
#include "comm/dist_internal.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/work.hpp"
#include "tree_comm/tree_comm_internal.hpp"
#include "tree_comm/group_buffers.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"

namespace tensortree {

namespace {

// One agreement round: SchemaMismatch on every rank unless every rank holds `fingerprint`.
void check_same_layout(std::uint64_t fingerprint, const Group& group, std::string_view op) {
  const std::optional<std::string> differs = detail::disagreement(group, fingerprint, "tree layouts");
  if (!differs) return;
  throw SchemaMismatch(fmt::format("{}: {}; every rank needs a tree of one layout", op, *differs));
}

// Reduces the tree in place, one call per dtype bucket; into `dst` only when it is set. The layout
// check is done before this returns; the buckets' reductions stay in flight.
WorkPtr reduce_buckets(const TensorTree& tree, const Group& group, ReduceOp op, std::optional<int> dst,
                       std::string_view name) {
  dist::detail::check_member(group, name);
  // The name tells a tree's reduction from dist's: each dtype bucket's own call is checked again.
  const std::string_view tree_op = dst ? "tree reduce" : "tree all_reduce";
  dist::detail::check_collective({.op = tree_op, .root = dst.value_or(-1), .reduction = op}, group, [&] {
    if (dst) dist::detail::check_rank(*dst, "dst", group, name);
  });
  const Device device = detail::device_of(tree, name);
  const detail::TreeLayout layout = detail::layout_of(tree, device);
  check_same_layout(layout.schema->fingerprint(), group, name);
  StoragePtr buffer = layout.storage;
  if (!buffer) {
    const StoragePtr spare = detail::spare_buffer(group, layout.schema->total_bytes(), device);
    buffer = detail::pack_tree(tree, {.device = device, .reuse = spare}).storage;
  }
  auto works = std::make_shared<std::vector<WorkPtr>>();
  for (const DTypeBucket& bucket : layout.schema->buckets()) {
    if (bucket.nbytes == 0) continue;
    const Tensor view(buffer, bucket.offset, bucket.dtype,
                      {static_cast<std::int64_t>(bucket.nbytes / itemsize(bucket.dtype))}, {});
    works->push_back(dst ? dist::reduce_async(view, *dst, group, op) : dist::all_reduce_async(view, group, op));
  }
  const bool unpack = !layout.storage && (!dst || *dst == group.rank());
  // One Work for the buckets: it completes when the last has (each is waited, in posting order).
  WorkPtr all = works->empty() ? Work::completed() : works->back();
  return Work::then(std::move(all), [works, buffer, unpack, tree, schema = layout.schema] {
    for (const WorkPtr& work : *works) work->wait();
    if (unpack) tree.unpack_from(*buffer, *schema);
  });
}

}  // namespace

void TensorTree::reduce(int dst, const Group& group, ReduceOp op) { reduce_async(dst, group, op)->wait(); }

WorkPtr TensorTree::reduce_async(int dst, const Group& group, ReduceOp op) {
  return reduce_buckets(*this, group, op, dst, "reduce");
}

void TensorTree::all_reduce(const Group& group, ReduceOp op) { all_reduce_async(group, op)->wait(); }

WorkPtr TensorTree::all_reduce_async(const Group& group, ReduceOp op) {
  return reduce_buckets(*this, group, op, std::nullopt, "all_reduce");
}

}  // namespace tensortree
