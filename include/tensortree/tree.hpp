// TensorTree: a nested, string-keyed container of tensors sharing a leading batch_size
// (the C++ counterpart of Python's TensorDict).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensortree/comm_options.hpp"
#include "tensortree/device.hpp"
#include "tensortree/export.hpp"
#include "tensortree/path.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/shape.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/tree_options.hpp"

namespace tensortree {

// The communication layer stays out of this header: its methods need only these names.
class Group;
class Work;
using WorkPtr = std::shared_ptr<Work>;
template <class T>
struct Pending;
class Schema;
struct MemmapOptions;
struct LoadMemmapOptions;

namespace detail {
struct ConsolidationAccess;
}  // namespace detail

struct TreeTransfer;

// A value type: copying a tree copies its structure while the leaves share storage (like td.copy()).
// Invariants, checked on every insert: each leaf's shape starts with its node's batch_size, and each
// sub-tree's batch_size starts with its parent's. Entries iterate in insertion order.
class TT_API TensorTree {
 public:
  using LeafFn = std::function<Tensor(const Tensor&)>;

  TensorTree() = default;
  explicit TensorTree(Shape batch_size);
  // TensorTree({4}, {{"obs", obs}, {"next.reward", reward}})
  TensorTree(Shape batch_size, std::initializer_list<std::pair<PathRef, Tensor>> leaves);

  TensorTree(const TensorTree& other);
  TensorTree(TensorTree&& other) noexcept;
  // Assigning through subtree() replaces that node inside its tree: its batch_size must still
  // start with its parent's.
  TensorTree& operator=(const TensorTree& other);
  TensorTree& operator=(TensorTree&& other);
  ~TensorTree();

  // ---- entries ----------------------------------------------------------------------------
  // Inserts or replaces (keeping the key's position) a leaf or a sub-tree; missing intermediate
  // nodes are created with their parent's batch_size. InvalidArgument when a batch_size check fails
  // or an intermediate key names a leaf; the tree is unchanged then.
  void set(PathRef path, Tensor leaf);
  void set(PathRef path, TensorTree subtree);
  // Writes `src` into the existing leaf in place (same shape and dtype): keeps consolidation.
  void set_(PathRef path, const Tensor& src) const;

  // References stay valid until the entry is replaced or erased.
  const Tensor& get(PathRef path) const;
  // The empty path names this tree itself.
  TensorTree& subtree(PathRef path);
  const TensorTree& subtree(PathRef path) const;

  bool contains(PathRef path) const;
  // True for a leaf, false for a sub-tree; InvalidArgument when the path is absent.
  bool is_leaf(PathRef path) const;
  void erase(PathRef path);

  // Direct entries only (len(td.keys()); TensorDict's len(td) is batch_size()[0]).
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  // TensorDict's order: insertion order, and with include_nested a sub-tree's keys come before the
  // sub-tree's own key.
  std::vector<Path> keys(const KeysOptions& options = {}) const;
  // Every leaf, depth-first in insertion order.
  std::vector<std::pair<Path, Tensor>> leaves() const;
  // fn(path, leaf) for every leaf, in the order of leaves(), without building a list.
  template <class Fn>
  void for_each_leaf(Fn&& fn) const;
  // fn(path, node) for this tree (empty path) and every sub-tree, parents before children.
  template <class Fn>
  void for_each_node(Fn&& fn) const;

  // ---- batch dimensions and device -----------------------------------------------------------
  const Shape& batch_size() const { return batch_size_; }
  void set_batch_size(Shape batch_size);
  std::int64_t batch_dims() const { return static_cast<std::int64_t>(batch_size_.size()); }
  // The device of every leaf, or nullopt when leaves disagree or there are none.
  std::optional<Device> device() const;

  // ---- batch indexing: views where possible --------------------------------------------------
  // Drops the first batch dimension, keeping row `i` (negative counts from the end).
  TensorTree index(std::int64_t i) const;
  // Rows start, start+step, ... below stop along batch dimension `dim` (Python slice clamping), as
  // Tensor::slice: tree.slice(0, {0, 64}).
  TensorTree slice(std::int64_t dim, const Slice& range) const;
  // Gathers rows of the first batch dimension (1-D int64/int32 CPU index): a copy.
  TensorTree index(const Tensor& rows) const;

  // ---- whole-tree operations -----------------------------------------------------------------
  // A tree of the same structure holding fn(leaf); each result must still start with its batch_size.
  TensorTree apply(const LeafFn& fn) const;
  // Copies fn(leaf) into each leaf: an in-place write, so consolidation is kept.
  void apply_(const LeafFn& fn) const;
  TensorTree to(Device device) const;
  TensorTree clone() const;
  // Same batch sizes, same keys at every node (in any order), leaves equal element by element.
  bool equal(const TensorTree& other) const;
  // Joins trees of identical structure leaf by leaf: along a new batch dimension `dim`
  // (0..batch_dims) / along existing batch dimension `dim`. InvalidArgument names the first
  // differing key or batch size.
  static TensorTree stack(std::span<const TensorTree> trees, std::int64_t dim = 0);
  static TensorTree cat(std::span<const TensorTree> trees, std::int64_t dim = 0);
  static TensorTree stack(std::initializer_list<TensorTree> trees, std::int64_t dim = 0);
  static TensorTree cat(std::initializer_list<TensorTree> trees, std::int64_t dim = 0);

  // Keys of nested leaves joined with `sep` ("next.obs") into one level; empty sub-trees stay as
  // empty sub-trees under their joined key. Two entries mapping to one key is InvalidArgument.
  TensorTree flatten_keys(char sep = '.') const;
  // The reverse: each key split at `sep`; collisions are InvalidArgument naming the key.
  TensorTree unflatten_keys(char sep = '.') const;
  // A tree holding only `paths` (leaves or whole sub-trees) and the nodes leading to them;
  // absent ones are InvalidArgument. select({"obs", "next.reward"}) or select(tree.keys({.include_nested = true})).
  TensorTree select(const std::vector<Path>& paths) const;
  TensorTree select(std::initializer_list<PathRef> paths) const;
  // A tree without `paths`; absent ones are ignored, as in TensorDict.
  TensorTree exclude(const std::vector<Path>& paths) const;
  TensorTree exclude(std::initializer_list<PathRef> paths) const;
  // Sets every entry of `other` here; sub-trees present on both sides are updated recursively.
  // Not atomic: when an entry fails its batch_size check, the entries before it are already set.
  TensorTree& update(const TensorTree& other);

  // ---- TensorDict's tree API (tree_shape.cpp, tree_mask.cpp, tree_inplace.cpp, tree_math.cpp,
  // tree_memory.cpp, tree_build.cpp). `dim` counts batch dimensions only (negative from the end);
  // leaves keep their feature dimensions; every sub-tree follows its parent's batch dimensions.
  // InvalidArgument names the operation, the batch_size and the leaf.
  using PairLeafFn = std::function<Tensor(const Tensor&, const Tensor&)>;

  // Batch shape: views of the leaves where their strides allow.
  std::vector<TensorTree> unbind(std::int64_t dim = 0) const;
  // Pieces of `size` rows along `dim` (the last may be shorter) / of the given sizes (summing to
  // the dimension's size).
  std::vector<TensorTree> split(std::int64_t size, std::int64_t dim = 0) const;
  std::vector<TensorTree> split(const std::vector<std::int64_t>& sizes, std::int64_t dim = 0) const;
  // torch.chunk: pieces of ceil(size / n) rows, so there may be fewer than n.
  std::vector<TensorTree> chunk(std::int64_t n, std::int64_t dim = 0) const;
  // The batch dimensions become `batch_size` (one -1 inferred); reshape copies a leaf whose strides
  // allow no view, view() throws InvalidArgument for it.
  TensorTree reshape(Shape batch_size) const;
  TensorTree view(Shape batch_size) const;
  // Removes batch dimension `dim` if its size is 1 (a no-op otherwise, as in TensorDict); squeeze()
  // removes every batch dimension of size 1.
  TensorTree squeeze(std::int64_t dim) const;
  TensorTree squeeze() const;
  // Inserts a batch dimension of size 1 at `dim` (0..batch_dims; negative from the end).
  TensorTree unsqueeze(std::int64_t dim) const;
  // `dims` is a permutation of the batch dimensions.
  TensorTree permute(std::span<const std::int64_t> dims) const;
  TensorTree permute(std::initializer_list<std::int64_t> dims) const;
  // TensorDict.expand: `batch_size` ends with the current batch dimensions (size-1 ones may grow,
  // -1 keeps a size), new dimensions in front; leaves become stride-0 views.
  TensorTree expand(Shape batch_size) const;

  // Masks: `mask` is a bool tensor whose shape is the leading batch dimensions (all or some).
  // The rows where it is true, gathered into a new first batch dimension (a copy): td[mask].
  // index(rows) with a bool tensor does the same.
  TensorTree masked_select(const Tensor& mask) const;
  // Leaf by leaf torch.where(cond, leaf, other's leaf): `other` holds the same keys and shapes.
  TensorTree where(const Tensor& cond, const TensorTree& other) const;
  // Writes `value` into every leaf where `mask` is true; the mask is checked before any write.
  void masked_fill_(const Tensor& mask, double value) const;

  // In place (leaves keep their memory, so consolidation is kept).
  void zero_() const;
  void fill_(double value) const;
  // Fills the leaf at `path`, or every leaf of the sub-tree there.
  void fill_(PathRef path, double value) const;
  // Copies every leaf of `other` into this tree's leaf at the same path (same shape and dtype): keys
  // of `other` must be a subset of ours. Everything is checked before the first write.
  void update_(const TensorTree& other) const;
  // Moves the entry at `old_path` (leaf or sub-tree) to `new_path`, as TensorDict's rename_key_
  // (the new key goes last; with `safe` an existing `new_path` is InvalidArgument, else replaced).
  void rename_key_(PathRef old_path, PathRef new_path, bool safe = false);

  // Whole-tree math. Two-tree forms need the same keys (InvalidArgument naming the first that
  // differs) and the same batch_size.
  // fn(leaf, other's leaf) for every leaf; each result must start with the batch_size.
  TensorTree apply(const PairLeafFn& fn, const TensorTree& other) const;
  // Tensor::allclose for every pair of leaves.
  bool allclose(const TensorTree& other, double rtol = 1e-5, double atol = 1e-8) const;
  // Per-leaf reductions over batch dimension `dim`, which the result's batch_size loses. min/max
  // give the values (TensorDict also returns indices; these are amin/amax).
  TensorTree sum(std::int64_t dim) const;
  TensorTree mean(std::int64_t dim) const;
  TensorTree min(std::int64_t dim) const;
  TensorTree max(std::int64_t dim) const;

  // Element-wise arithmetic, leaf by leaf, as TensorDict's td + other, td * 2, td.float() (Tensor's
  // rules: broadcasting, PyTorch's type promotion). Two-tree forms pair leaves by key: the trees need
  // the same keys (InvalidArgument naming the first missing on either side) and batch_size; the
  // result has this tree's batch_size. A leaf's failure names its key. In-place forms are not
  // atomic: leaves before a failing one are already written. (tree_arith.cpp)
  TensorTree add(const TensorTree& other) const;
  TensorTree add(Scalar other) const;
  TensorTree sub(const TensorTree& other) const;
  TensorTree sub(Scalar other) const;
  TensorTree mul(const TensorTree& other) const;
  TensorTree mul(Scalar other) const;
  TensorTree div(const TensorTree& other) const;
  TensorTree div(Scalar other) const;
  const TensorTree& add_(const TensorTree& other) const;
  const TensorTree& add_(Scalar other) const;
  const TensorTree& sub_(const TensorTree& other) const;
  const TensorTree& sub_(Scalar other) const;
  const TensorTree& mul_(const TensorTree& other) const;
  const TensorTree& mul_(Scalar other) const;
  const TensorTree& div_(const TensorTree& other) const;
  const TensorTree& div_(Scalar other) const;
  TensorTree neg() const;
  TensorTree abs() const;
  TensorTree sqrt() const;
  TensorTree exp() const;
  TensorTree log() const;
  TensorTree clamp(std::optional<double> min, std::optional<double> max) const;
  // Trees of bool leaves.
  TensorTree eq(const TensorTree& other) const;
  TensorTree eq(Scalar other) const;
  TensorTree ne(const TensorTree& other) const;
  TensorTree ne(Scalar other) const;
  TensorTree lt(const TensorTree& other) const;
  TensorTree lt(Scalar other) const;
  TensorTree le(const TensorTree& other) const;
  TensorTree le(Scalar other) const;
  TensorTree gt(const TensorTree& other) const;
  TensorTree gt(Scalar other) const;
  TensorTree ge(const TensorTree& other) const;
  TensorTree ge(Scalar other) const;
  // Every leaf converted to `dtype` (Tensor::to(DType)); the named forms as Tensor's.
  TensorTree to(DType dtype) const;
  TensorTree to_float() const { return to(DType::Float32); }
  TensorTree to_double() const { return to(DType::Float64); }
  TensorTree half() const { return to(DType::Float16); }
  TensorTree bfloat16() const { return to(DType::BFloat16); }
  TensorTree to_int() const { return to(DType::Int32); }
  TensorTree to_long() const { return to(DType::Int64); }
  TensorTree to_bool() const { return to(DType::Bool); }

  // Memory.
  // A copy in page-locked host memory (CPU leaves; NotSupported without a usable CUDA runtime).
  TensorTree pin_memory() const;
  // to(device) whose copies run on a worker thread when `non_blocking`: read the tree only after
  // `work` completes. Leaves already on `device` are shared, not copied.
  TreeTransfer to(Device device, bool non_blocking) const;
  // Moves the leaves into one memfd-backed buffer (the tree becomes consolidated on it) that
  // another process can map: a forked child shares it, another process maps
  // storage()->shared_fd() (passed over a Unix socket, or /proc/<pid>/fd/<fd>) with
  // Storage::map_shared and rebuilds the tree with from_consolidated(storage, schema()).
  // NotSupported for CUDA leaves.
  TensorTree& share_memory_();
  // True when the tree has leaves and every leaf lives in memfd-backed memory.
  bool is_shared() const;

  // Every (path, leaf), depth-first in insertion order: for (const auto& [path, leaf] : td.items()).
  std::vector<std::pair<Path, Tensor>> items() const;
  // Construction with one batch_size for every entry: leaves keyed by path ("next.obs" nests), or
  // nested entries (see TreeInit).
  static TensorTree from_map(Shape batch_size, const std::map<std::string, Tensor>& leaves);
  static TensorTree from_nested(Shape batch_size, std::initializer_list<TreeInit> entries);

  // ---- printing -------------------------------------------------------------------------------
  // TensorDict's repr, fields sorted by key as TensorDict prints them (shapes and dtypes, no values).
  std::string str() const;
  // What operator<< prints: the batch size and device, then each key in insertion order with its
  // leaf's values as PyTorch prints them (abbreviated beyond 1000 elements), a sub-tree's keys
  // indented under it:
  //   TensorTree(batch_size=[2], device=cpu)
  //       obs: tensor([[1., 2.],
  //                    [3., 4.]])
  //       next: TensorTree(batch_size=[2], device=cpu)
  //           reward: tensor([0.5000, 1.5000])
  std::string values_str() const;

  // ---- structure version ------------------------------------------------------------------------
  // A number, unique in the process, that changes whenever this node's structure changes: an entry
  // set, erased, renamed or replaced, a batch_size changed, the tree assigned or moved from, a leaf
  // rebound to other memory, anywhere below this node. In-place writes into leaves keep it. Senders
  // key their cached packing plans on it, so a tree sent again unchanged is packed without a walk.
  std::uint64_t structure_version() const { return structure_version_; }

  // ---- consolidation (one buffer holding every leaf) --------------------------------------------
  // Only a root reports it. Kept by in-place writes into leaves; any structural change anywhere in
  // the tree, also through a subtree() reference, releases the root's buffer at once.
  bool is_consolidated() const { return storage_ != nullptr; }
  // Null when not consolidated.
  const StoragePtr& storage() const { return storage_; }
  const std::shared_ptr<const Schema>& schema() const { return schema_; }
  TensorTree consolidate(const ConsolidateOptions& options = {}) const;
  // consolidate() without waiting for the GPU: a tree whose leaves are on a CUDA device is packed by
  // a kernel queued on the legacy default stream, behind the caller's current stream. Later library
  // work on the device (a send, a collective, a copy) is ordered after it, so a consolidate-then-send
  // pipeline never waits on the host; read the buffer from the host, or from another stream, once
  // `work` completes (work->make_stream_wait(stream) orders a stream after it). The source's leaves
  // are kept alive until then and must not be written meanwhile. Any other tree is packed before it
  // returns, with `work` complete. auto [packed, work] = tree.consolidate_async();
  TreeTransfer consolidate_async(const ConsolidateOptions& options = {}) const;
  // consolidate() into memory that `group`'s transports send from without a copy, for a tree sent
  // through `group` more than once: on a GPU that other members share, memory they open through
  // CUDA IPC (each send is then one copy, the receiver's, straight out of this buffer); on the host,
  // the node's shared memory. Elsewhere the same as consolidate(). options.reuse is ignored; keep
  // the buffer with consolidate_into. The send of such a tree completes when the receiver has its
  // copy: write the tree again only after that.
  TensorTree consolidate_for(const Group& group, const ConsolidateOptions& options = {}) const;
  // consolidate() for a sender that packs trees of one structure again and again. When `target` is
  // consolidated with this tree's layout on the device it asks for (an earlier result of
  // consolidate() or consolidate_into(), say) and no leaf of this tree views its buffer, this tree's
  // bytes are copied into that buffer and nothing else is built: the leaves of `target`, and every
  // other view of its buffer, see the new values. Otherwise `target` becomes consolidate(options)
  // (options.reuse is used only then).
  void consolidate_into(TensorTree& target, const ConsolidateOptions& options = {}) const;
  // A tree whose leaves view `storage` as `schema` lays it out: no copy. InvalidArgument when the
  // storage is smaller than the schema's total_bytes or on another kind of device.
  static TensorTree from_consolidated(StoragePtr storage, std::shared_ptr<const Schema> schema);
  // The reverse of consolidate(): copies a buffer laid out by `schema` into this tree's own leaves
  // (any strides, any device), in one pass. SchemaMismatch when this tree's layout differs.
  void unpack_from(const Storage& buffer, const Schema& schema, int threads = 0) const;

  // ---- communication: whole trees as single messages (tree_comm.cpp; wire format in transfer.hpp) --
  // Ranks are ranks of `group`; every leaf on one device. The contracts (receivers' layouts, the
  // buffer a consolidated receiver takes, copies of it that keep their values, what must stay
  // alive) are in the README, "Moving whole trees". A failed receive (SchemaMismatch, corrupt header,
  // wrong length) leaves the leaves as they were; the message it refused is dropped.
  void send(int dst, const Group& group, const CommOptions& options = {}) const;
  // The tree's values must stay unchanged until the Work completes.
  [[nodiscard]] WorkPtr isend(int dst, const Group& group, const CommOptions& options = {}) const;
  // Into a tree of the sender's layout. `src` may be kAnySource for host trees (NotSupported where a
  // CUDA transport cannot match any sender). Returns the rank that sent.
  int recv(int src, const Group& group, const CommOptions& options = {});
  // The tree must stay where it is until the Work completes; Work::source_rank() names the sender.
  [[nodiscard]] WorkPtr irecv(int src, const Group& group, const CommOptions& options = {});
  // For a receiver that knows nothing of the tree: the schema, then the data (two messages at most).
  void init_remote(int dst, const Group& group, const CommOptions& options = {}) const;
  static TensorTree from_remote_init(int src, const Group& group, const CommOptions& options = {});

  // Collectives: every rank of the group calls them. A receiving tree is either of the sender's
  // layout (received into) or empty (becomes a new consolidated tree).
  TensorTree& broadcast(int src, const Group& group);
  // One tree per rank, in rank order; the ranks' trees may differ in batch size or layout.
  std::vector<TensorTree> all_gather(const Group& group) const;
  // On `dst`, one tree per rank; elsewhere an empty vector.
  std::vector<TensorTree> gather(int dst, const Group& group) const;
  // trees[r] (read on `src` only; one per rank, any layouts) reaches rank r as broadcast() does.
  TensorTree& scatter(int src, std::span<const TensorTree> trees, const Group& group);
  // In place, one call per dtype of the layout; every rank must hold the same layout.
  void reduce(int dst, const Group& group, ReduceOp op = ReduceOp::Sum);
  void all_reduce(const Group& group, ReduceOp op = ReduceOp::Sum);

  // Asynchronous forms: only the data round is in flight when they return. A tree the operation
  // writes must stay where it is, and a Pending be kept, until the Work completes.
  [[nodiscard]] WorkPtr broadcast_async(int src, const Group& group);
  [[nodiscard]] Pending<std::vector<TensorTree>> all_gather_async(const Group& group) const;
  [[nodiscard]] Pending<std::vector<TensorTree>> gather_async(int dst, const Group& group) const;
  [[nodiscard]] WorkPtr scatter_async(int src, std::span<const TensorTree> trees, const Group& group);
  [[nodiscard]] WorkPtr reduce_async(int dst, const Group& group, ReduceOp op = ReduceOp::Sum);
  [[nodiscard]] WorkPtr all_reduce_async(const Group& group, ReduceOp op = ReduceOp::Sum);

  // ---- memory-mapped storage (src/memmap/; layout, options and errors in memmap.hpp) ------------
  // The only spelling of each (TensorDict's td.memmap_(dir), TensorDict.load_memmap(dir)). The
  // one-argument overloads stand for options = {}: the option structs are incomplete here, so they
  // cannot be default arguments.
  // Writes the tree in TensorDict's directory layout, crash-safe, and makes its leaves views of the
  // mapped files (later in-place writes go to the files).
  TensorTree& memmap_(const std::filesystem::path& dir);
  TensorTree& memmap_(const std::filesystem::path& dir, const MemmapOptions& options);
  // A tree of this one's structure on disk, zero-filled sparse files, without writing data.
  TensorTree memmap_like(const std::filesystem::path& dir) const;
  TensorTree memmap_like(const std::filesystem::path& dir, const MemmapOptions& options) const;
  // Maps a saved tree lazily: nothing is read until a leaf's bytes are touched.
  static TensorTree load_memmap(const std::filesystem::path& dir);
  static TensorTree load_memmap(const std::filesystem::path& dir, const LoadMemmapOptions& options);

 private:
  friend struct detail::ConsolidationAccess;

  struct Entry {
    std::string key;
    Tensor leaf;                       // set when the entry is a leaf
    std::unique_ptr<TensorTree> node;  // set when the entry is a sub-tree
  };
  using PathLeafFn = std::function<Tensor(const Path&, const Tensor&)>;
  using BatchFn = std::function<Shape(const Shape&)>;
  enum class Keep { Drop, Whole, Descend };
  using KeepFn = std::function<Keep(const Path&)>;

  // Only a root holds consolidation state; the leaves must be views into `storage`.
  void attach_consolidation(StoragePtr storage, std::shared_ptr<const Schema> schema);

  // core (tree.cpp)
  void take_contents(TensorTree&& source);
  void replace_with(TensorTree&& root_source);
  void adopt_children();
  static std::uint64_t fresh_structure_version();
  // Gives this node and each ancestor a fresh structure version.
  void bump_structure_version();
  // bump_structure_version(), and the root releases its buffer: a structural change anywhere makes
  // the root's consolidation stale.
  void structure_changed();
  const TensorTree& root() const;
  bool is_ancestor_of(const TensorTree& node) const;
  Path location() const;
  // "'next.obs'" with this node's location in front, for error messages.
  std::string describe(const Path& relative) const;
  std::string keys_hint() const;
  static constexpr std::size_t kIndexedEntries = 16;
  std::optional<std::size_t> position_of(const std::string& key) const;
  void reindex();
  const Entry* find(const std::string& key) const;
  Entry* find(const std::string& key);
  const Entry& entry_at(const Path& path) const;
  const TensorTree& deepest_node_on(const Path& path) const;
  TensorTree& node_for_insert(const Path& path);
  Entry& upsert(const std::string& key);
  Entry& push_entry(Entry entry);
  void append(std::string key, Tensor leaf);
  void append(std::string key, TensorTree subtree);
  void check_child_fits(const Path& path, const Shape& child_batch, const Shape& parent_batch) const;
  void check_leaf_fits(const Path& path, const Tensor& leaf, const Shape& node_batch) const;
  void collect_keys(Path& prefix, bool include_nested, bool leaves_only, std::vector<Path>& out) const;

  // ops (tree_ops.cpp)
  TensorTree transformed(const PathLeafFn& leaf_fn, const BatchFn& batch_fn) const;
  TensorTree transformed(Path& path, const PathLeafFn& leaf_fn, const BatchFn& batch_fn) const;
  TensorTree filtered(Path& path, const KeepFn& keep) const;
  void flatten_into(TensorTree& out, Path& path, char sep,
                    std::unordered_map<std::string, Path>& origins) const;
  void update_from(const TensorTree& other);
  static TensorTree joined(std::span<const TensorTree* const> trees, Path& path, std::int64_t dim,
                           bool new_dim);
  static void check_same_keys(std::span<const TensorTree* const> trees, const Path& path,
                              const char* operation);

  // TensorDict's tree API helpers
  using PairPathFn = std::function<Tensor(const Path&, const Tensor&, const Tensor&)>;
  TensorTree paired(const TensorTree& other, Path& path, const char* operation, const PairPathFn& fn) const;
  TensorTree reshaped(Shape batch_size, bool copy_allowed) const;
  TensorTree reduced(const char* operation, std::int64_t dim,
                     Tensor (Tensor::*leaf_fn)(std::int64_t, bool) const) const;
  // element-wise arithmetic (tree_arith.cpp): fn on every leaf / pair of leaves, errors naming the leaf
  TensorTree leafwise(const char* operation, const std::function<Tensor(const Tensor&)>& fn) const;
  TensorTree leafwise(const char* operation, const TensorTree& other, const PairLeafFn& fn) const;
  void build_from(const std::vector<TreeInit>& entries);

  template <class Fn>
  void visit_leaves(Path& path, Fn& fn) const;
  template <class Fn>
  void visit_nodes(Path& path, Fn& fn) const;

  std::vector<Entry> entries_;
  // key -> position in entries_, kept only for nodes of at least kIndexedEntries entries. Copies of a
  // node (a copied tree, a consolidated or transformed one with the same keys) share it until one of
  // them changes its keys: copying a wide tree builds no hash nodes.
  using KeyIndex = std::unordered_map<std::string, std::size_t>;
  std::shared_ptr<KeyIndex> index_;
  Shape batch_size_;
  TensorTree* parent_ = nullptr;  // the node holding this one; null for a root
  StoragePtr storage_;            // consolidation: root only
  std::shared_ptr<const Schema> schema_;
  std::uint64_t structure_version_ = fresh_structure_version();
};

// What TensorTree::to(device, non_blocking) returns: auto [gpu, work] = td.to(dev, true).
struct [[nodiscard]] TreeTransfer {
  TensorTree tree;
  WorkPtr work;
};

}  // namespace tensortree

// The operators (printing, and the element-wise methods: a + b, td * 2, td += other), and the
// bodies of the member templates.
#include "tensortree/tree_operators.hpp"
#include "tensortree/tree_visit.hpp"
