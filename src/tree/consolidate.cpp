// consolidate(), from_consolidated() and unpack_from(): moving a tree's leaves into one buffer
// laid out by its Schema, and back.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "core/tensor_access.hpp"
#include "tree/consolidation_access.hpp"
#include "core/cuda_api.hpp"
#include "tree/layout_difference.hpp"
#include "tree/layout_plan.hpp"
#include "tree/tree_packing.hpp"
#include "core/pack_cpu.hpp"
#include "core/strided_copy.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/work.hpp"

namespace tensortree {

namespace detail {

void ConsolidationAccess::copy_views(const TensorTree& source, TensorTree& target, const StoragePtr& storage,
                                     std::span<const std::uint64_t> offsets, std::size_t& next_leaf) {
  target.batch_size_ = source.batch_size_;
  target.index_ = source.index_;
  target.entries_.reserve(source.entries_.size());
  for (const TensorTree::Entry& entry : source.entries_) {
    if (entry.node) {
      auto child = std::make_unique<TensorTree>();
      copy_views(*entry.node, *child, storage, offsets, next_leaf);
      child->parent_ = &target;
      target.entries_.emplace_back(entry.key, Tensor{}, std::move(child));
    } else {
      // Built in place: the plan placed every view inside the buffer.
      TensorTree::Entry& view = target.entries_.emplace_back();
      view.key = entry.key;
      TensorAccess::planned_view(view.leaf, storage, offsets[next_leaf++], entry.leaf);
    }
  }
}

long ConsolidationAccess::holders_in(const TensorTree& node, const Storage* storage) {
  long holders = 0;
  for (const TensorTree::Entry& entry : node.entries_) {
    if (entry.node) {
      holders += holders_in(*entry.node, storage);
    } else if (entry.leaf.storage().get() == storage) {
      ++holders;
    }
  }
  return holders;
}

void ConsolidationAccess::leaf_storages(const TensorTree& node, std::vector<StoragePtr>& out) {
  for (const TensorTree::Entry& entry : node.entries_) {
    if (entry.node) {
      leaf_storages(*entry.node, out);
    } else if (out.empty() || out.back() != entry.leaf.storage()) {
      out.push_back(entry.leaf.storage());
    }
  }
}

bool ConsolidationAccess::buffer_shared(const TensorTree& root) {
  const StoragePtr& buffer = root.storage_;
  return buffer.use_count() > 1 + holders_in(root, buffer.get());
}

void ConsolidationAccess::rebind_leaves(TensorTree& node, const StoragePtr& storage) {
  // Every node's plans name the old storage: a reference to a sub-tree must not reuse them.
  node.structure_version_ = TensorTree::fresh_structure_version();
  for (TensorTree::Entry& entry : node.entries_) {
    if (entry.node) {
      rebind_leaves(*entry.node, storage);
    } else {
      Tensor& leaf = entry.leaf;
      leaf = Tensor(storage, leaf.byte_offset(), leaf.dtype(), leaf.shape(), leaf.strides());
    }
  }
}

void ConsolidationAccess::rebind(TensorTree& root, StoragePtr storage) {
  rebind_leaves(root, storage);
  root.storage_ = std::move(storage);
}

TensorTree ConsolidationAccess::views_like(const TensorTree& source, const StoragePtr& storage,
                                           std::span<const std::uint64_t> offsets) {
  TensorTree result;
  std::size_t next_leaf = 0;
  copy_views(source, result, storage, offsets, next_leaf);
  return result;
}

void ConsolidationAccess::build_from_recipe(const TreeRecipe& recipe, std::size_t node, TensorTree& target,
                                            const StoragePtr& storage) {
  const TreeRecipe::Node& step = recipe.nodes[node];
  const std::vector<LeafSpec>& leaves = recipe.schema->leaves();
  target.batch_size_ = step.spec->batch_size;
  target.entries_.reserve(step.entries.size());
  for (const TreeRecipe::Entry& entry : step.entries) {
    if (entry.is_leaf) {
      // The schema was validated (every leaf inside total_bytes) and the storage holds total_bytes.
      const LeafSpec& leaf = leaves[entry.index];
      TensorTree::Entry& view = target.entries_.emplace_back();
      view.key = *entry.key;
      TensorAccess::planned_view(view.leaf, storage, leaf.offset, leaf.dtype, leaf.shape);
    } else {
      auto child = std::make_unique<TensorTree>();
      build_from_recipe(recipe, entry.index, *child, storage);
      child->parent_ = &target;
      target.entries_.emplace_back(*entry.key, Tensor{}, std::move(child));
    }
  }
  target.index_ = step.index;
}

TensorTree ConsolidationAccess::views_from_schema(const std::shared_ptr<const Schema>& schema,
                                                  const StoragePtr& storage) {
  const std::shared_ptr<const TreeRecipe> recipe = recipe_for(schema, TensorTree::kIndexedEntries);
  TensorTree result;
  build_from_recipe(*recipe, 0, result, storage);
  return result;
}

}  // namespace detail

namespace {

using detail::PackDirection;
using detail::PackSegment;
using detail::StridedView;

void move_segments(PackDirection direction, const detail::ResolvedSegments& s, const Storage& buffer,
                   std::uint64_t total_bytes, int threads) {
  if (buffer.device().is_cpu()) {
    detail::pack_cpu(direction, s.segments, s.strided, buffer.data(), total_bytes, threads);
  } else {
    cuda::pack(direction, s.segments, s.strided, buffer.data(), total_bytes, buffer.device().index());
  }
}

// Packs where the leaves are (on `source`) and, when `buffer` is elsewhere, moves the whole
// payload across in one copy.
void pack_segments(const detail::ResolvedSegments& segments, Device source, const Storage& buffer, std::uint64_t total, int threads) {
  if (buffer.device() == source) {
    move_segments(PackDirection::Pack, segments, buffer, total, threads);
    return;
  }
  const StoragePtr staged = Storage::allocate(total, source, source.is_cpu() && buffer.device().is_cuda());
  move_segments(PackDirection::Pack, segments, *staged, total, threads);
  cuda::copy_bytes(buffer.data(), staged->data(), total);
}

bool reusable(const StoragePtr& reuse, Device target, std::uint64_t total_bytes) {
  return reuse && reuse->device() == target && reuse->nbytes() >= total_bytes;
}

// The buffer a walked tree is packed into: options.reuse when it fits, else a new one with room for
// a wire header behind the payload (a send then writes it there instead of packing again).
StoragePtr buffer_for(const detail::WalkedTree& walked, const ConsolidateOptions& options) {
  const std::uint64_t total = walked.plan->schema->total_bytes();
  if (reusable(options.reuse, walked.target, total)) return options.reuse;
  return Storage::allocate(total + kWireHeaderBytes, walked.target, options.pinned && walked.target.is_cpu());
}

// `target` can take the walked tree's bytes in place: it is a consolidated tree of the same layout
// in a buffer on `device` that no leaf of the source views.
bool refreshable(const TensorTree& target, const detail::TreePacking& packing, Device device,
                 const ConsolidateOptions& options) {
  if (!target.is_consolidated()) return false;
  const Schema& have = *target.schema();
  const Schema& want = *packing.plan->schema;
  if (&have != &want && have.fingerprint() != want.fingerprint()) return false;
  const Storage& buffer = *target.storage();
  if (buffer.device() != device || (options.pinned && !buffer.is_pinned())) return false;
  return !packing.reads_from(&buffer);
}

TensorTree consolidated_tree(const TensorTree& tree, const detail::WalkedTree& walked, const ConsolidateOptions& options) {
  detail::PackedTree packed = detail::pack_walked(walked, options);
  TensorTree result = detail::ConsolidationAccess::views_like(tree, packed.storage, packed.plan->offsets);
  detail::ConsolidationAccess::attach(result, std::move(packed.storage), packed.plan->schema);
  return result;
}

}  // namespace

namespace detail {

WalkedTree walk_for_packing(const TensorTree& tree, const ConsolidateOptions& options, std::string_view op) {
  const std::optional<Device> asked = options.device ? std::optional(resolve_device(*options.device)) : std::nullopt;
  std::shared_ptr<const TreePacking> packing =
      packing_for(tree, asked ? std::optional(asked->type()) : std::nullopt, op);
  const Device target = asked.value_or(packing->source);
  std::shared_ptr<const LayoutPlan> plan = packing->plan;
  return {std::move(packing), target, std::move(plan)};
}

PackedTree pack_walked(const WalkedTree& walked, const ConsolidateOptions& options) {
  const std::uint64_t total = walked.plan->schema->total_bytes();
  StoragePtr storage = buffer_for(walked, options);
  pack_segments(resolve(*walked.packing), walked.packing->source, *storage, total, options.threads);
  return {std::move(storage), walked.plan};
}

PackedTree pack_tree(const TensorTree& tree, const ConsolidateOptions& options) {
  return pack_walked(walk_for_packing(tree, options, "consolidate"), options);
}

}  // namespace detail

TensorTree TensorTree::consolidate(const ConsolidateOptions& options) const {
  return consolidated_tree(*this, detail::walk_for_packing(*this, options, "consolidate"), options);
}

TreeTransfer TensorTree::consolidate_async(const ConsolidateOptions& options) const {
  const detail::WalkedTree walked = detail::walk_for_packing(*this, options, "consolidate_async");
  const Device source = walked.packing->source;
  if (!walked.target.is_cuda() || source != walked.target) return {consolidated_tree(*this, walked, options), Work::completed()};
  const std::uint64_t total = walked.plan->schema->total_bytes();
  StoragePtr storage = buffer_for(walked, options);
  const detail::ResolvedSegments& segments = detail::resolve(*walked.packing);
  // The leaves' storages and the buffer outlive the kernel.
  auto keep_alive = std::make_shared<std::vector<StoragePtr>>(1, storage);
  detail::ConsolidationAccess::leaf_storages(*this, *keep_alive);
  WorkPtr work = cuda::pack_async(PackDirection::Pack, segments.segments, segments.strided, storage->data(), total,
                                  walked.target.index(), std::move(keep_alive));
  TensorTree result = detail::ConsolidationAccess::views_like(*this, storage, walked.plan->offsets);
  detail::ConsolidationAccess::attach(result, std::move(storage), walked.plan->schema);
  return {std::move(result), std::move(work)};
}

void TensorTree::consolidate_into(TensorTree& target, const ConsolidateOptions& options) const {
  if (&target == this) {
    target = consolidate(options);
    return;
  }
  const detail::WalkedTree walked = detail::walk_for_packing(*this, options, "consolidate_into");
  if (refreshable(target, *walked.packing, walked.target, options)) {
    pack_segments(detail::resolve(*walked.packing), walked.packing->source, *target.storage(),
                  walked.plan->schema->total_bytes(), options.threads);
    return;
  }
  target = consolidated_tree(*this, walked, options);
}

TensorTree TensorTree::from_consolidated(StoragePtr storage, std::shared_ptr<const Schema> schema) {
  if (!storage || !schema) throw InvalidArgument("from_consolidated needs a storage and a schema");
  if (storage->nbytes() < schema->total_bytes()) {
    throw InvalidArgument(fmt::format("from_consolidated: the schema lays out {} bytes but the storage holds {}",
                                      schema->total_bytes(), storage->nbytes()));
  }
  if (storage->device().type() != schema->storage_device()) {
    throw InvalidArgument(fmt::format("from_consolidated: the schema describes a {} buffer but the storage is on {}",
                                      Device(schema->storage_device(), 0), storage->device()));
  }
  TensorTree result = detail::ConsolidationAccess::views_from_schema(schema, storage);
  detail::ConsolidationAccess::attach(result, std::move(storage), std::move(schema));
  return result;
}

void TensorTree::unpack_from(const Storage& buffer, const Schema& schema, int threads) const {
  const auto packing = detail::packing_for(*this, schema.storage_device(), "unpack_from");
  const detail::LayoutPlan& plan = *packing->plan;
  if (plan.schema->fingerprint() != schema.fingerprint()) {
    // Both layouts are known here: the first key that differs says more than two fingerprints.
    const std::string difference = detail::difference_text(*plan.schema, schema, "in the buffer");
    throw SchemaMismatch(fmt::format("unpack_from: this tree's layout differs from the buffer's{} (fingerprints {} "
                                     "here, {} in the buffer)", difference.empty() ? "" : ", " + difference,
                                     plan.schema->fingerprint(), schema.fingerprint()));
  }
  if (buffer.nbytes() < schema.total_bytes()) {
    throw InvalidArgument(fmt::format("unpack_from: the schema lays out {} bytes but the buffer holds {}",
                                      schema.total_bytes(), buffer.nbytes()));
  }
  const Device leaves = packing->source;
  const detail::ResolvedSegments& segments = detail::resolve(*packing);
  if (buffer.device() == leaves || packing->segments.empty()) {
    move_segments(PackDirection::Unpack, segments, buffer, schema.total_bytes(), threads);
    return;
  }
  const StoragePtr staged = Storage::allocate(schema.total_bytes(), leaves);
  cuda::copy_bytes(staged->data(), buffer.data(), schema.total_bytes());
  move_segments(PackDirection::Unpack, segments, *staged, schema.total_bytes(), threads);
}

}  // namespace tensortree
