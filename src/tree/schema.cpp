// Schema layout (plan), invariant checks shared by plan() and decode(), and lookups; the fingerprint
// is in schema_fingerprint.cpp.
#include "tensortree/schema.hpp"

#include <algorithm>
#include <cassert>
#include <compare>
#include <cstring>
#include <memory>
#include <new>
#include <iterator>
#include <numeric>
#include <optional>
#include <string_view>

#include "core/checked_math.hpp"
#include "core/strided_view.hpp"
#include "core/text_format.hpp"
#include "tree/schema_fingerprint.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

static_assert(Schema::kMaxRank == detail::kMaxDims, "every schema leaf must fit a strided view");
static_assert(Schema::kMaxEntries <= UINT32_MAX, "leaf indices are stored as u32");

namespace {

// A node's path (or a LeafPlan's); a schema's leaf paths are PathViews into its key arena. The
// helpers below take either.
using Keys = std::span<const std::string>;

Keys parent_of(Keys path) { return path.first(path.size() - 1); }
PathView parent_of(PathView path) { return path.first(path.size() - 1); }

// Key by key, each key's bytes compared as memcmp does, the shorter path first: Path's own order,
// without building a string.
template <class A, class B>
std::strong_ordering compare_paths(const A& a, const B& b) {
  return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end(),
                                                [](std::string_view x, std::string_view y) { return x <=> y; });
}
// Two of the arena's paths: mostly one memcmp (PathView's order).
std::strong_ordering compare_paths(PathView a, PathView b) { return a <=> b; }

// Equality alone looks at the key lengths before any byte.
template <class A, class B>
bool same_path(const A& a, const B& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](std::string_view x, std::string_view y) { return x == y; });
}

std::string joined(Keys path) { return path_str(Path(path.begin(), path.end())); }
std::string joined(PathView path) { return path_str(path); }

template <class P>
std::string quoted(const P& path) {
  if (path.empty()) return "<root>";
  return fmt::format("'{}'", joined(path));
}

template <class P>
std::string leaf_name(const P& path) {
  return fmt::format("leaf {}", quoted(path));
}
std::string node_name(Keys path) { return fmt::format("node {}", quoted(path)); }

template <class P>
const NodeSpec* find_node_in(std::span<const NodeSpec> sorted_nodes, const P& path) {
  const auto it = std::lower_bound(sorted_nodes.begin(), sorted_nodes.end(), path,
                                   [](const NodeSpec& node, const P& p) { return compare_paths(node.path, p) < 0; });
  return it != sorted_nodes.end() && compare_paths(it->path, path) == 0 ? &*it : nullptr;
}

static_assert(Schema::kAlignment == detail::kByteAlignment);

std::uint64_t align_up(std::uint64_t bytes) {
  const std::optional<std::uint64_t> padded = detail::checked_align_up(bytes, Schema::kAlignment);
  if (!padded) throw InvalidArgument("the leaves need more than 2^64 bytes");
  return *padded;
}

template <class P>
void check_dtype(DType dtype, const P& path) {
  const auto raw = static_cast<std::uint8_t>(dtype);
  if (!is_valid_dtype(raw)) {
    throw InvalidArgument(fmt::format("{} has unknown dtype value {}", leaf_name(path), raw));
  }
}

// numel * itemsize, each step overflow-checked so that a hostile shape cannot wrap around.
template <class P>
std::uint64_t leaf_nbytes(DType dtype, const Shape& shape, const P& path) {
  check_dtype(dtype, path);
  for (const std::int64_t dim : shape) {
    if (dim < 0) throw InvalidArgument(fmt::format("{} has a negative dimension in shape {}", leaf_name(path),
                                                   shape_str(shape)));
  }
  const std::optional<std::uint64_t> nbytes = detail::checked_nbytes(shape, itemsize(dtype));
  if (!nbytes) {
    throw InvalidArgument(fmt::format("{} of shape {} and dtype {} holds more than 2^63 bytes", leaf_name(path),
                                      shape_str(shape), dtype));
  }
  return *nbytes;
}

// Places each leaf at the next aligned offset; returns total_bytes.
std::uint64_t assign_offsets(std::vector<LeafSpec>& layout_ordered, const PathList& paths) {
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < layout_ordered.size(); ++i) {
    LeafSpec& leaf = layout_ordered[i];
    leaf.offset = align_up(end);
    const std::optional<std::uint64_t> leaf_end = detail::checked_add(leaf.offset, leaf.nbytes);
    if (!leaf_end) throw InvalidArgument(fmt::format("the leaves need more than 2^64 bytes (at {})",
                                                     leaf_name(paths[i])));
    end = *leaf_end;
  }
  return align_up(end);
}

// Names a node (P = Keys) or a leaf (P = PathView) in a message; built only when a check fails.
template <class P>
struct Owner {
  const char* kind;
  P path;
  std::string name() const { return fmt::format("{} {}", kind, quoted(path)); }
};

template <class K, class P>
void check_key_lengths(const K& keys, const Owner<P>& owner) {
  for (const std::string_view key : keys) {
    if (key.size() > Schema::kMaxKeyBytes) {
      throw InvalidArgument(fmt::format("{} has a key of {} bytes, more than the {} allowed", owner.name(), key.size(),
                                        Schema::kMaxKeyBytes));
    }
  }
}

template <class P>
void check_path(const Owner<P>& owner) {
  if (owner.path.size() > Schema::kMaxDepth) {
    throw InvalidArgument(fmt::format("{} is {} keys deep, more than the {} allowed", owner.name(), owner.path.size(),
                                      Schema::kMaxDepth));
  }
  check_key_lengths(owner.path, owner);
}

template <class P>
void check_dims(const Shape& shape, const Owner<P>& owner, const char* field) {
  if (shape.size() > Schema::kMaxRank) {
    throw InvalidArgument(fmt::format("{} {} has rank {}, more than the {} allowed", owner.name(), field, shape.size(),
                                      Schema::kMaxRank));
  }
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; })) {
    throw InvalidArgument(fmt::format("{} {} {} has a negative dimension", owner.name(), field, shape_str(shape)));
  }
}

// A batch of more than 2^63 elements names no real tree, and every count derived from it would wrap.
void check_batch_numel(const Shape& batch_size, const Owner<Keys>& owner) {
  if (!detail::checked_nbytes(batch_size, 1)) {
    throw InvalidArgument(fmt::format("{} batch_size {} holds more than 2^63 elements", owner.name(),
                                      shape_str(batch_size)));
  }
}

void check_count(std::size_t count, const char* what) {
  if (count > Schema::kMaxEntries) {
    throw InvalidArgument(fmt::format("{} {} exceeds the limit of {}", what, count, Schema::kMaxEntries));
  }
}

// Bounds on every field, checked before anything relies on them.
void validate_entries(std::span<const NodeSpec> nodes, std::span<const LeafSpec> leaves, const PathList& paths,
                      DeviceType device) {
  if (device != DeviceType::CPU && device != DeviceType::CUDA) {
    throw InvalidArgument(fmt::format("unknown storage device kind {}", static_cast<unsigned>(device)));
  }
  check_count(nodes.size(), "node count");
  check_count(leaves.size(), "leaf count");
  for (const NodeSpec& node : nodes) {
    const Owner<Keys> owner{"node", node.path};
    check_path(owner);
    check_dims(node.batch_size, owner, "batch_size");
    check_batch_numel(node.batch_size, owner);
    check_count(node.keys.size(), "key count");
    check_key_lengths(node.keys, owner);
  }
  assert(paths.size() == leaves.size());  // plan() and decode() build them together
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const LeafSpec& leaf = leaves[i];
    const Owner<PathView> owner{"leaf", paths[i]};
    if (owner.path.empty()) throw InvalidArgument("a leaf has the empty path, which belongs to the root node");
    check_path(owner);
    check_dtype(leaf.dtype, owner.path);
    check_dims(leaf.shape, owner, "shape");
  }
}

// The index of a child's parent node. Children visited in path order mostly share the previous one's
// parent, or have the node after it, so those are compared first and the binary search over all
// nodes is the exception.
class ParentFinder {
 public:
  explicit ParentFinder(std::span<const NodeSpec> nodes) : nodes_(nodes) {}

  template <class P>
  std::size_t index_of(const Owner<P>& child) {
    const P parent_path = parent_of(child.path);
    if (is_parent(last_, parent_path)) return last_;
    // The walk moved on to the next node's children (the common case), or somewhere else.
    if (is_parent(last_ + 1, parent_path)) return ++last_;
    const NodeSpec* parent = find_node_in(nodes_, parent_path);
    if (!parent) throw InvalidArgument(fmt::format("{} has no parent node {}", child.name(), quoted(parent_path)));
    last_ = static_cast<std::size_t>(parent - nodes_.data());
    return last_;
  }

 private:
  template <class P>
  bool is_parent(std::size_t i, const P& parent_path) const {
    return i < nodes_.size() && same_path(nodes_[i].path, parent_path);
  }

  std::span<const NodeSpec> nodes_;
  std::size_t last_ = 0;
};

// Nodes strictly in path order (so unique), root first, each batch_size extending its parent's.
// The order is checked first, so that the parent lookups search a sorted list.
void validate_nodes(std::span<const NodeSpec> nodes) {
  if (nodes.empty() || !nodes.front().path.empty()) throw InvalidArgument("the schema has no root node");
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    if (compare_paths(nodes[i - 1].path, nodes[i].path) >= 0) {
      throw InvalidArgument(fmt::format("{} is repeated or out of path order (after {})", node_name(nodes[i].path),
                                        quoted(nodes[i - 1].path)));
    }
  }
  ParentFinder parents(nodes);
  for (const NodeSpec& node : nodes.subspan(1)) {
    const NodeSpec& parent = nodes[parents.index_of(Owner<Keys>{"node", node.path})];
    if (!starts_with(node.batch_size, parent.batch_size)) {
      throw InvalidArgument(fmt::format("{} has batch_size {}, which does not start with its parent's {}",
                                        node_name(node.path), shape_str(node.batch_size),
                                        shape_str(parent.batch_size)));
    }
  }
}

// A node's keys and its actual children (sorted) must be the same set, with no repeats on either side.
// Looks each key up instead of sorting the keys: a node may hold thousands of leaves.
void check_keys_match_children(const NodeSpec& node, const std::vector<std::string_view>& children) {
  if (const auto dup = std::adjacent_find(children.begin(), children.end()); dup != children.end()) {
    throw InvalidArgument(fmt::format("{} has two children named '{}'", node_name(node.path), *dup));
  }
  // Keys inserted in sorted order (common) are the children themselves: one comparison each.
  if (std::equal(node.keys.begin(), node.keys.end(), children.begin(), children.end())) return;
  std::vector<bool> listed(children.size());
  for (const std::string& key : node.keys) {
    const auto it = std::lower_bound(children.begin(), children.end(), std::string_view(key));
    if (it == children.end() || *it != key) {
      throw InvalidArgument(fmt::format("{} lists key '{}' but has no such leaf or node", node_name(node.path), key));
    }
    const auto index = static_cast<std::size_t>(it - children.begin());
    if (listed[index]) throw InvalidArgument(fmt::format("{} lists key '{}' twice", node_name(node.path), key));
    listed[index] = true;
  }
  if (const auto unlisted = std::find(listed.begin(), listed.end(), false); unlisted != listed.end()) {
    throw InvalidArgument(fmt::format("{} does not list its child '{}' among its keys", node_name(node.path),
                                      children[static_cast<std::size_t>(unlisted - listed.begin())]));
  }
}

// Walking sub-nodes and leaves in path order meets each node's children in key order, so one merge of
// the two per node sorts them without a full sort.
void validate_children(std::span<const NodeSpec> nodes, std::span<const LeafSpec> leaves, const PathList& paths,
                       std::span<const std::uint32_t> leaves_by_path) {
  std::vector<std::vector<std::string_view>> children(nodes.size());
  // A valid node has as many children as keys: one allocation each (an invalid one may grow).
  for (std::size_t i = 0; i < nodes.size(); ++i) children[i].reserve(nodes[i].keys.size());
  ParentFinder parents(nodes);
  for (const NodeSpec& node : nodes.subspan(1)) {
    children[parents.index_of(Owner<Keys>{"node", node.path})].push_back(node.path.back());
  }
  std::vector<std::size_t> child_nodes(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) child_nodes[i] = children[i].size();
  for (const std::uint32_t index : leaves_by_path) {
    const LeafSpec& leaf = leaves[index];
    const PathView path = paths[index];
    const std::size_t parent = parents.index_of(Owner<PathView>{"leaf", path});
    if (!starts_with(leaf.shape, nodes[parent].batch_size)) {
      throw InvalidArgument(fmt::format("{} has shape {}, which does not start with its node's batch_size {}",
                                        leaf_name(path), shape_str(leaf.shape),
                                        shape_str(nodes[parent].batch_size)));
    }
    children[parent].push_back(path.back());
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto first = children[i].begin();
    std::inplace_merge(first, first + static_cast<std::ptrdiff_t>(child_nodes[i]), children[i].end());
    check_keys_match_children(nodes[i], children[i]);
  }
}

// Each leaf starts at the first aligned offset after the previous one, inside the buffer.
void check_offset(const LeafSpec& leaf, PathView path, std::uint64_t previous_end, std::uint64_t total_bytes) {
  const auto where = [&] { return fmt::format("{} at offset {}", leaf_name(path), leaf.offset); };
  if (leaf.offset % Schema::kAlignment != 0) {
    throw InvalidArgument(fmt::format("{} is not aligned to {} bytes", where(), Schema::kAlignment));
  }
  if (leaf.offset < previous_end) {
    throw InvalidArgument(fmt::format("{} overlaps the previous leaf, which ends at {}", where(), previous_end));
  }
  const std::optional<std::uint64_t> end = detail::checked_add(leaf.offset, leaf.nbytes);
  if (!end || *end > total_bytes) {
    throw InvalidArgument(fmt::format("{} with {} bytes lies outside the buffer of {} bytes", where(), leaf.nbytes,
                                      total_bytes));
  }
  if (leaf.offset != align_up(previous_end)) {
    throw InvalidArgument(fmt::format("{} leaves a gap after the previous leaf (expected offset {})", where(),
                                      align_up(previous_end)));
  }
}

// Layout order: dtype bucket, then path, each leaf once. One comparison of the two paths decides.
void check_follows(DType previous_dtype, PathView previous_path, DType dtype, PathView path) {
  if (previous_dtype < dtype) return;
  const std::strong_ordering order =
      previous_dtype == dtype ? compare_paths(previous_path, path) : std::strong_ordering::greater;
  if (order == 0) throw InvalidArgument(fmt::format("{} appears twice", leaf_name(path)));
  if (order > 0) {
    throw InvalidArgument(fmt::format("{} is out of layout order (dtype bucket, then path) after {}",
                                      leaf_name(path), quoted(previous_path)));
  }
}

void validate_layout(std::span<const LeafSpec> leaves, const PathList& paths, std::uint64_t total_bytes) {
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const LeafSpec& leaf = leaves[i];
    const PathView path = paths[i];
    if (i > 0) check_follows(leaves[i - 1].dtype, paths[i - 1], leaf.dtype, path);
    if (const std::uint64_t expected = leaf_nbytes(leaf.dtype, leaf.shape, path); leaf.nbytes != expected) {
      throw InvalidArgument(fmt::format("{} records {} bytes but shape {} of {} needs {}", leaf_name(path),
                                        leaf.nbytes, shape_str(leaf.shape), leaf.dtype, expected));
    }
    check_offset(leaf, path, end, total_bytes);
    end = leaf.offset + leaf.nbytes;
  }
  if (total_bytes != align_up(end)) {
    throw InvalidArgument(fmt::format("total_bytes {} differs from the {} bytes the leaves need", total_bytes,
                                      align_up(end)));
  }
}

// Each bucket is already sorted by path, so the path order is a merge of the bucket runs.
std::vector<std::uint32_t> index_by_path(const PathList& paths, std::span<const DTypeBucket> buckets) {
  std::vector<std::uint32_t> order(paths.size());
  std::iota(order.begin(), order.end(), 0U);
  const auto by_path = [&](std::uint32_t a, std::uint32_t b) { return compare_paths(paths[a], paths[b]) < 0; };
  for (const DTypeBucket& bucket : buckets) {
    const auto start = order.begin() + static_cast<std::ptrdiff_t>(bucket.first_leaf);
    std::inplace_merge(order.begin(), start, start + static_cast<std::ptrdiff_t>(bucket.leaf_count), by_path);
  }
  return order;
}

std::vector<DTypeBucket> collect_buckets(std::span<const LeafSpec> leaves) {
  std::vector<DTypeBucket> buckets;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const LeafSpec& leaf = leaves[i];
    if (buckets.empty() || buckets.back().dtype != leaf.dtype) {
      buckets.push_back({leaf.dtype, leaf.offset, 0, i, 0});
    }
    DTypeBucket& bucket = buckets.back();
    bucket.nbytes = leaf.offset + leaf.nbytes - bucket.offset;
    ++bucket.leaf_count;
  }
  return buckets;
}

// Indices of `leaves` in layout order. Sorting by dtype compares small integers; a tree usually lists
// its leaves in path order already, so each dtype's run is checked and sorted only when it is not.
std::vector<std::uint32_t> layout_order(std::span<const LeafPlan> leaves) {
  check_count(leaves.size(), "leaf count");
  std::vector<std::uint32_t> order(leaves.size());
  std::iota(order.begin(), order.end(), 0U);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return leaves[a].dtype < leaves[b].dtype; });
  const auto by_path = [&](std::uint32_t a, std::uint32_t b) { return compare_paths(leaves[a].path, leaves[b].path) < 0; };
  for (auto run = order.begin(); run != order.end();) {
    const DType dtype = leaves[*run].dtype;
    const auto run_end =
        std::find_if(run, order.end(), [&](std::uint32_t i) { return leaves[i].dtype != dtype; });
    if (!std::is_sorted(run, run_end, by_path)) std::sort(run, run_end, by_path);
    run = run_end;
  }
  return order;
}

}  // namespace

Schema::Schema(std::vector<NodeSpec> nodes, std::vector<LeafSpec> leaves, PathList leaf_paths,
               std::uint64_t total_bytes, DeviceType storage_device)
    : nodes_(std::move(nodes)),
      leaves_(std::move(leaves)),
      leaf_paths_(std::move(leaf_paths)),
      total_bytes_(total_bytes),
      storage_device_(storage_device) {
  validate_entries(nodes_, leaves_, leaf_paths_, storage_device_);
  validate_nodes(nodes_);
  validate_layout(leaves_, leaf_paths_, total_bytes_);
  buckets_ = collect_buckets(leaves_);
  leaves_by_path_ = index_by_path(leaf_paths_, buckets_);
  validate_children(nodes_, leaves_, leaf_paths_, leaves_by_path_);
  fingerprint_ = detail::layout_fingerprint(nodes_, leaves_, leaf_paths_, total_bytes_);
}

Schema Schema::plan(std::vector<NodeSpec> nodes, std::vector<LeafPlan> leaves, DeviceType storage_device) {
  const auto by_path = [](const NodeSpec& a, const NodeSpec& b) { return a.path < b.path; };
  if (!std::is_sorted(nodes.begin(), nodes.end(), by_path)) std::sort(nodes.begin(), nodes.end(), by_path);
  std::vector<LeafSpec> layout;
  layout.reserve(leaves.size());
  PathList paths;
  std::size_t keys = 0;
  std::size_t key_bytes = 0;
  for (const LeafPlan& leaf : leaves) {
    keys += leaf.path.size();
    for (const std::string& key : leaf.path) key_bytes += key.size();
  }
  paths.reserve(leaves.size(), keys, key_bytes);
  for (const std::uint32_t i : layout_order(leaves)) {
    LeafPlan& leaf = leaves[i];
    const std::uint64_t nbytes = leaf_nbytes(leaf.dtype, leaf.shape, leaf.path);
    layout.push_back({leaf.dtype, std::move(leaf.shape), 0, nbytes});
    paths.push_back(leaf.path);
  }
  const std::uint64_t total_bytes = assign_offsets(layout, paths);
  return Schema(std::move(nodes), std::move(layout), std::move(paths), total_bytes, storage_device);
}

namespace {

template <class P>
const LeafSpec* find_leaf_in(std::span<const LeafSpec> leaves, const PathList& paths,
                             std::span<const std::uint32_t> leaves_by_path, const P& path) {
  const auto it = std::lower_bound(leaves_by_path.begin(), leaves_by_path.end(), path,
                                   [&](std::uint32_t i, const P& p) { return compare_paths(paths[i], p) < 0; });
  return it != leaves_by_path.end() && compare_paths(paths[*it], path) == 0 ? &leaves[*it] : nullptr;
}

}  // namespace

const LeafSpec* Schema::find_leaf(const Path& path) const {
  return find_leaf_in(leaves_, leaf_paths_, leaves_by_path_, path);
}
const LeafSpec* Schema::find_leaf(PathView path) const {
  return find_leaf_in(leaves_, leaf_paths_, leaves_by_path_, path);
}

const NodeSpec* Schema::find_node(const Path& path) const { return find_node_in(nodes_, Keys(path)); }
const NodeSpec* Schema::find_node(PathView path) const { return find_node_in(nodes_, path); }

const DTypeBucket* Schema::find_bucket(DType dtype) const {
  const auto it = std::find_if(buckets_.begin(), buckets_.end(), [&](const DTypeBucket& b) { return b.dtype == dtype; });
  return it != buckets_.end() ? &*it : nullptr;
}

bool operator==(const Schema& a, const Schema& b) {
  return a.fingerprint_ == b.fingerprint_ && a.total_bytes_ == b.total_bytes_ &&
         a.storage_device_ == b.storage_device_ && a.leaves_ == b.leaves_ && a.leaf_paths_ == b.leaf_paths_ &&
         a.nodes_ == b.nodes_;
}

}  // namespace tensortree
