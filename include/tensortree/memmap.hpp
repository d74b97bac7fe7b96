// Memory-mapped trees in TensorDict's directory layout: what tree.memmap_() writes, Python's
// TensorDict.load_memmap() opens, and what TensorDict writes, TensorTree::load_memmap() opens.
//
//   dir/meta.json            {"<child>": {"type": "TensorDict"}, "<leaf>": {"device": "cpu",
//                             "shape": [..], "dtype": "torch.float32", "is_nested": false},
//                             "shape": [batch], "device": "cpu", "_type": "<class '...TensorDict'>"}
//   dir/<leaf>.memmap        raw C-order bytes, numel * itemsize exactly
//   dir/<child>/meta.json    the same, one directory per node
//
// Keys become file names through encode_memmap_key(). A loaded tree's leaves view the mapped files:
// nothing is read until a page is touched, and a slice of the tree touches only its own pages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/export.hpp"
#include "tensortree/path.hpp"
#include "tensortree/shape.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

// What a save does when its directory already holds something. An empty directory counts as
// absent under either policy, so a directory made by mkdtemp can be the target.
enum class MemmapOverwrite {
  Error,    // InvalidArgument when the directory holds anything
  Replace,  // swaps in the new tree atomically when the directory holds a memmap tree (a meta.json);
            // any other non-empty directory is still InvalidArgument: a save never deletes foreign files
};

struct MemmapOptions {
  MemmapOverwrite overwrite = MemmapOverwrite::Error;
  int threads = 0;  // writer threads; 0: one per 64 MiB, at most the core count
  // Called on the calling thread with (bytes written, total bytes): after each piece it wrote
  // itself, and once at the end with done == total.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress = {};
  // Every file and directory reaches stable storage before publishing (written back as the save
  // goes, then fsync'd together, so the device merges their flushes). Without it a save is still
  // safe against a killed process (the page cache outlives it), not against a power loss.
  bool durable = true;
};

enum class MemmapMode {
  ReadOnly,   // the files are never written; writes into the tree stay in this process (copy-on-write)
  ReadWrite,  // writes into the tree reach the files, and every process mapping them sees them
  // Every leaf is read into one block of this process's memory when the tree loads, by several
  // threads: the fastest way to read a whole tree (a mapping reads it a page fault at a time), and
  // nothing stays mapped or open, so a tree of any number of leaves loads (each mapping counts
  // against vm.max_map_count). Later changes to the files are not seen; the files are never written.
  Copy,
};

struct LoadMemmapOptions {
  MemmapMode mode = MemmapMode::ReadOnly;
  // cpu(): as `mode` says. cuda:N: the leaves are read into one device block (each leaf a view of
  // it; `mode` does not matter) through pinned staging buffers: several threads read the next
  // chunks out of the files while the chunks read before them cross the bus (NotSupported without
  // a usable CUDA device).
  Device device = Device::cpu();
  // Loads only the sub-tree at this path ({"next"}); the empty path is the whole tree.
  Path sub_path = {};
  // Bytes each reading thread reads at a time into a block (MemmapMode::Copy, CUDA loads); on the
  // CUDA path also the bytes of each pinned staging buffer: two per reader thread, one thread per
  // core up to 16.
  std::size_t staging_bytes = std::size_t{4} << 20;
  // When set, the files are read into this tree's leaves, as MemmapMode::Copy reads them but with
  // no new memory, and load_memmap returns it: a reader that loads checkpoints again and again
  // reuses its tree (TensorDict's `out=`). It must hold exactly the saved keys, each contiguous on
  // the CPU with the saved dtype and shape: InvalidArgument naming the first key that differs.
  std::optional<TensorTree> out = std::nullopt;
  // madvise(MADV_RANDOM) on every mapping: a page fault reads only its page, not the kernel's
  // read-around window (read_ahead_kb, often megabytes). For sampling scattered rows; it slows a
  // sequential read of everything.
  bool random_access = false;
};

// ---- saving and loading: TensorTree's members (declared in tree.hpp) -------------------------------
// As in TensorDict, one way to say each: tree.memmap_(dir), tree.memmap_like(dir) and
// TensorTree::load_memmap(dir), each with an optional options argument (MemmapOptions,
// LoadMemmapOptions above). Only empty_memmap, which has no member, is a free function.
//
// tree.memmap_(dir[, options]): writes the tree under `dir` crash-safely (a temporary sibling
// directory, synced to disk, renamed into place) and makes its leaves views of the mapped files (read-write),
// so later in-place writes go to the files. A killed save leaves the previous tree loadable; of two
// concurrent saves one wins. InvalidArgument for keys meta.json cannot hold ("shape", "device",
// "_type" and non-UTF-8 keys).
//
// TensorTree::load_memmap(dir[, options]): maps the tree saved under `dir`. The mappings are shared
// with every process that maps the files: a file truncated by someone else while mapped makes
// touching its lost pages fault (SIGBUS), as with any mmap. CorruptData (naming the file, the key
// path and the sizes) for anything that breaks the layout: missing or truncated files, symbolic
// links, bad meta.json fields; a leaf of zero bytes needs no file (TensorDict writes none). A file
// longer than its leaf is CorruptData too, although TensorDict reads only the bytes it needs:
// meta.json and the file then disagree, and which one is wrong cannot be told. NotSupported for
// TensorDict features this library has no counterpart for (nested tensors, tensorclasses, non-tensor
// data).
//
// tree.memmap_like(dir[, options]): a tree of `tree`'s structure, dtypes and shapes under `dir`,
// zero-filled: the files are sparse (ftruncate), so nothing is written but the metadata. Its leaves
// view the files read-write.

// Preallocates a tree of capacity `batch_size` on disk (a replay buffer of N steps): every leaf of
// `templ` becomes a zero-filled leaf of shape batch_size + (its shape without the first
// templ.batch_dims() dimensions), and every node's batch_size is rewritten the same way. So a
// template holding one step (batch_size {}) and batch_size {N} gives leaves of shape {N, ...}.
// Several processes can then TensorTree::load_memmap(dir, {.mode = ReadWrite}) and write disjoint
// rows.
TT_API TensorTree empty_memmap(const std::filesystem::path& dir, const TensorTree& templ, Shape batch_size,
                               const MemmapOptions& options = {});

// ---- the file names ---------------------------------------------------------------------------
// TensorDict's robust key encoding: / < > : " | ? * \ space NUL % control characters and DEL become
// %XX (upper-case hex); besides, the empty key is "%", "." is "%2E" and ".." is "%2E%2E", so that
// every key is one ordinary directory entry.
TT_API std::string encode_memmap_key(std::string_view key);
// The reverse; CorruptData for a malformed name ("%" not followed by two hex digits, a "/" or NUL).
TT_API std::string decode_memmap_key(std::string_view name);

// ---- inspection without reading data -------------------------------------------------------------
// One node or leaf of a saved tree, as its metadata describes it.
struct MemmapEntryInfo {
  Path path;                     // empty for the root (or the sub-tree asked for)
  bool is_node = false;
  Shape shape;                   // a node's batch_size, a leaf's shape
  DType dtype = DType::Float32;  // leaves only
  std::uint64_t nbytes = 0;      // leaves: numel * itemsize, what the file must hold
  std::int64_t file_bytes = -1;  // leaves: the file's size; -1 when missing or not a regular file
  std::filesystem::path file;    // a node's directory, a leaf's file
};

struct MemmapListing {
  // Depth first in meta.json order, each node before its entries.
  std::vector<MemmapEntryInfo> entries;
  // One line per leaf file that is missing, not a regular file, or of the wrong size.
  std::vector<std::string> problems;
};

// Reads only the meta.json files and the leaf files' sizes (stat). Throws as
// TensorTree::load_memmap() does for broken metadata; leaf files that would fail the load are
// listed in `problems` instead.
TT_API MemmapListing list_memmap(const std::filesystem::path& dir, const Path& sub_path = {});

}  // namespace tensortree
