// Saving memmap trees: everything is written into a temporary sibling directory, made durable, and then
// published with one rename (or an atomic exchange with the previous tree), so that a reader or a
// crash only ever sees a whole old tree or a whole new one.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/text_format.hpp"
#include "memmap/memmap_fs.hpp"
#include "memmap/memmap_meta.hpp"
#include "memmap/memmap_publish.hpp"
#include "tensortree/error.hpp"
#include "tensortree/memmap.hpp"

namespace tensortree {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kChunkBytes = std::uint64_t{16} << 20;
constexpr std::uint64_t kBytesPerThread = std::uint64_t{64} << 20;

// What a save writes for one leaf: its file in the temporary tree and, unless the save only
// preallocates, the contiguous CPU tensor holding its bytes.
struct LeafJob {
  Path path;
  fs::path file;
  Tensor source;
  DType dtype = DType::Float32;
  Shape shape;
  std::uint64_t nbytes = 0;
};

// How a save turns a source leaf / node batch size into what it writes.
struct SaveRecipe {
  bool copy_data = true;
  std::size_t drop_dims = 0;  // empty_memmap: leading template dims replaced by `batch_size`
  Shape batch_size;

  Shape reshape(const Shape& shape) const {
    if (copy_data) return shape;
    Shape out = batch_size;
    out.insert(out.end(), shape.begin() + static_cast<std::ptrdiff_t>(drop_dims), shape.end());
    return out;
  }
};

// ---- writing ---------------------------------------------------------------------------------

void make_directory(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0) TT_OS_ERROR("mkdir", dir);
}

void write_small_file(const fs::path& file, const std::string& text) {
  const detail::FileDescriptor fd = detail::open_path(file, O_WRONLY | O_CREAT | O_EXCL, 0644);
  detail::write_all_at(fd.get(), text.data(), text.size(), 0, file);
}

// Creates the file at its final size: sparse, so a preallocated tree costs no disk until written.
void create_leaf_file(const LeafJob& leaf) {
  const detail::FileDescriptor fd = detail::open_path(leaf.file, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (::ftruncate(fd.get(), static_cast<off_t>(leaf.nbytes)) != 0) TT_OS_ERROR("ftruncate", leaf.file);
}

Tensor host_contiguous(const Tensor& leaf) {
  if (leaf.device().is_cuda()) return leaf.to(Device::cpu());
  return leaf.contiguous();
}

// What a node's directory will hold: meta.json, <key>.memmap per leaf, <key>/ per sub-tree. Keys
// that would share a name ("a" beside a sub-tree "a.memmap", a sub-tree "meta.json") or exceed the
// file system's name limit are the caller's mistake, refused before anything is written.
void check_disk_names(const TensorTree& tree) {
  constexpr std::size_t kMaxNameBytes = 255;  // NAME_MAX on every Linux file system
  std::unordered_map<std::string, std::string> owner;
  tree.for_each_node([&](const Path& node_path, const TensorTree& node) {
    owner.clear();
    owner.emplace(detail::kMetaFileName, "the node's own metadata");
    for (const Path& key_path : node.keys()) {
      const std::string& key = key_path.front();
      std::string name = node.is_leaf(key_path) ? detail::leaf_file_name(key) : encode_memmap_key(key);
      Path full = node_path;
      full.push_back(key);
      if (name.size() > kMaxNameBytes) {
        throw InvalidArgument(fmt::format("memmap_: key '{}' becomes the file name of {} bytes, over the limit of {}",
                                          path_str(full), name.size(), kMaxNameBytes));
      }
      const auto [it, fresh] = owner.emplace(name, fmt::format("key '{}'", path_str(full)));
      if (!fresh) {
        throw InvalidArgument(fmt::format("memmap_: key '{}' and {} would both be saved as '{}'", path_str(full),
                                          it->second, name));
      }
    }
  });
}

// Lays out one node (and its sub-trees) under `dir`: directories, meta.json files, the files of leaves
// with nothing to write. `written` collects every directory and file the save creates.
void lay_out(const TensorTree& node, const fs::path& dir, Path& path, const SaveRecipe& recipe,
             std::vector<LeafJob>& leaves, std::vector<fs::path>& written) {
  make_directory(dir);
  written.push_back(dir);
  detail::NodeMeta meta;
  meta.batch_size = recipe.reshape(node.batch_size());
  for (const Path& key_path : node.keys()) {
    const std::string& key = key_path.front();
    path.push_back(key);
    if (node.is_leaf(key_path)) {
      const Tensor& leaf = node.get(key_path);
      LeafJob job{path, dir / detail::leaf_file_name(key), {}, leaf.dtype(), recipe.reshape(leaf.shape()), 0};
      job.nbytes = detail::leaf_nbytes(job.dtype, job.shape, path_str(path));
      if (recipe.copy_data && job.nbytes > 0) job.source = host_contiguous(leaf);
      meta.entries.push_back({key, false, job.dtype, job.shape});
      // A leaf with bytes to write is created by the writer threads (creating files is where a file
      // system spends its time when leaves are many); the others are created here, at their size.
      if (!job.source.defined()) create_leaf_file(job);
      written.push_back(job.file);
      leaves.push_back(std::move(job));
    } else {
      meta.entries.push_back({key, true, DType::Float32, {}});
      lay_out(node.subtree(key_path), dir / encode_memmap_key(key), path, recipe, leaves, written);
    }
    path.pop_back();
  }
  write_small_file(dir / detail::kMetaFileName, detail::format_node_meta(meta));
  written.push_back(dir / detail::kMetaFileName);
}

struct Chunk {
  std::size_t leaf;
  std::uint64_t offset;
  std::uint64_t size;
};

std::vector<Chunk> chunks_of(const std::vector<LeafJob>& leaves) {
  std::vector<Chunk> chunks;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].source.defined()) continue;
    for (std::uint64_t offset = 0; offset < leaves[i].nbytes; offset += kChunkBytes) {
      chunks.push_back({i, offset, std::min(kChunkBytes, leaves[i].nbytes - offset)});
    }
  }
  return chunks;
}

// Writes every leaf's bytes, several threads pulling chunks from one list; the calling thread is
// one of them and the only one that reports progress.
class DataWriter {
 public:
  DataWriter(const std::vector<LeafJob>& leaves, const MemmapOptions& options)
      : leaves_(leaves), options_(options), chunks_(chunks_of(leaves)) {
    for (const LeafJob& leaf : leaves) {
      if (leaf.source.defined()) total_ += leaf.nbytes;
    }
  }

  void run() {
    std::vector<std::jthread> workers;
    for (int i = 1; i < thread_count(); ++i) workers.emplace_back([this] { work(false); });
    work(true);
    workers.clear();
    if (error_) std::rethrow_exception(error_);
    if (options_.progress) options_.progress(total_, total_);
  }

 private:
  int thread_count() const {
    int n = options_.threads;
    if (n <= 0) {
      const auto by_size = static_cast<int>(std::min<std::uint64_t>(total_ / kBytesPerThread + 1, 64));
      n = std::clamp(by_size, 1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    }
    return std::clamp(n, 1, static_cast<int>(std::max<std::size_t>(chunks_.size(), 1)));
  }

  void work(bool report) {
    while (!failed_.load()) {
      const std::size_t i = next_.fetch_add(1);
      if (i >= chunks_.size()) return;
      try {
        write_chunk(chunks_[i]);
      } catch (...) {
        const std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true);
        return;
      }
      const std::uint64_t done = done_.fetch_add(chunks_[i].size) + chunks_[i].size;
      if (report && options_.progress && done < total_) options_.progress(done, total_);
    }
  }

  void write_chunk(const Chunk& chunk) const {
    const LeafJob& leaf = leaves_[chunk.leaf];
    const detail::FileDescriptor fd = detail::open_path(leaf.file, O_WRONLY | O_CREAT, 0644);
    const auto* bytes = static_cast<const std::byte*>(leaf.source.data_ptr()) + chunk.offset;
    detail::write_all_at(fd.get(), bytes, chunk.size, chunk.offset, leaf.file);
    // Written back while later chunks are written, so the fsyncs at the end find little to do.
    if (options_.durable) detail::start_writeback(fd.get(), chunk.offset, chunk.size);
  }

  const std::vector<LeafJob>& leaves_;
  const MemmapOptions& options_;
  std::vector<Chunk> chunks_;
  std::uint64_t total_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::uint64_t> done_{0};
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// ---- the whole save -----------------------------------------------------------------------------

using detail::check_target;
using detail::normalized_target;
using detail::publish;
using detail::remove_stale_temps;
using detail::temp_sibling;
using detail::TempDirGuard;

TensorTree save(const TensorTree& tree, const fs::path& dir, const SaveRecipe& recipe, const MemmapOptions& options) {
  const fs::path target = normalized_target(dir);
  check_disk_names(tree);
  check_target(target, options.overwrite);
  fs::create_directories(target.parent_path());
  remove_stale_temps(target);

  const TempDirGuard temp(temp_sibling(target));
  std::vector<LeafJob> leaves;
  std::vector<fs::path> written;
  Path path;
  lay_out(tree, temp.path(), path, recipe, leaves, written);
  DataWriter(leaves, options).run();
  // Every file and directory of the temporary tree is durable before it is published.
  if (options.durable) detail::fsync_all(written);
  // Mapped before publishing, so the tree views exactly the files this save wrote even if another
  // save replaces them at `target` a moment later.
  TensorTree mapped = TensorTree::load_memmap(temp.path(), {.mode = MemmapMode::ReadWrite});
  publish(temp.path(), target, options.overwrite);
  if (options.durable) detail::fsync_directory(target.parent_path());
  return mapped;
}

}  // namespace

// ---- TensorTree's members (load_memmap is in memmap.cpp) --------------------------------------------

TensorTree& TensorTree::memmap_(const fs::path& dir) { return memmap_(dir, MemmapOptions{}); }

TensorTree& TensorTree::memmap_(const fs::path& dir, const MemmapOptions& options) {
  *this = save(*this, dir, SaveRecipe{}, options);
  return *this;
}

TensorTree TensorTree::memmap_like(const fs::path& dir) const { return memmap_like(dir, MemmapOptions{}); }

TensorTree TensorTree::memmap_like(const fs::path& dir, const MemmapOptions& options) const {
  return save(*this, dir, SaveRecipe{false, batch_size().size(), batch_size()}, options);
}

// ---- the free function with no member ---------------------------------------------------------------

TensorTree empty_memmap(const fs::path& dir, const TensorTree& templ, Shape batch_size, const MemmapOptions& options) {
  (void)numel_of(batch_size);  // InvalidArgument for a negative size
  return save(templ, dir, SaveRecipe{false, templ.batch_size().size(), std::move(batch_size)}, options);
}

}  // namespace tensortree
