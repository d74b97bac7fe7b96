// Loading memmap trees: every directory and file is opened relative to its parent's descriptor
// without following links, and every meta.json field is checked. Then either each leaf file is
// mapped (not read), so a loaded tree touches only the pages its reader touches; or every leaf is
// read into one block (MemmapMode::Copy, and every load onto a CUDA device), by several threads,
// with no mapping and no descriptor kept per leaf.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "core/text_format.hpp"
#include "memmap/block_image.hpp"
#include "memmap/device_upload.hpp"
#include "memmap/memmap_fs.hpp"
#include "memmap/memmap_meta.hpp"
#include "tensortree/error.hpp"
#include "tensortree/memmap.hpp"

namespace tensortree {

namespace fs = std::filesystem;

namespace {

// Deeper than any real tree; bounds the recursion over a hostile directory chain.
constexpr int kMaxDepth = 256;

std::string describe(const fs::path& file, const Path& path) {
  return fmt::format("'{}' (key '{}')", file.string(), path_str(path));
}

[[noreturn]] void corrupt(const fs::path& file, const Path& path, std::string_view why) {
  throw CorruptData(fmt::format("corrupt memmap tree: {} {}", describe(file, path), why));
}

// Why opening `name` in `dir_fd` failed, in words; CorruptData unless the OS itself failed.
[[noreturn]] void open_failed(int dir_fd, const std::string& name, int err, const fs::path& file, const Path& path,
                              const char* expected) {
  struct stat st {};
  if (err == ENOENT) corrupt(file, path, "is missing");
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) corrupt(file, path, "is a symbolic link; memmap trees hold none");
    if (err == ENOTDIR || err == EISDIR || err == ELOOP) {
      corrupt(file, path, fmt::format("is not {}", expected));
    }
  }
  detail::throw_os_error("open", file, err, __FILE__, __LINE__);
}

// A key TensorDict wrote without encoding (its legacy default) is still one plain directory entry.
bool is_plain_name(const std::string& key) {
  return !key.empty() && key != "." && key != ".." && key.find('/') == std::string::npos &&
         key.find('\0') == std::string::npos;
}

// Opens an entry by its encoded name, else by its raw (legacy TensorDict) name.
std::pair<detail::FileDescriptor, fs::path> open_entry(int dir_fd, const fs::path& dir, const std::string& key,
                                                       const std::string& suffix, int flags, const Path& path,
                                                       const char* expected) {
  std::string encoded = encode_memmap_key(key);
  encoded += suffix;
  auto [fd, err] = detail::open_at(dir_fd, encoded, flags);
  if (fd.valid()) return {std::move(fd), dir / encoded};
  std::string raw = key;
  raw += suffix;
  if (err == ENOENT && is_plain_name(key) && raw != encoded) {
    auto [legacy, legacy_err] = detail::open_at(dir_fd, raw, flags);
    if (legacy.valid()) return {std::move(legacy), dir / raw};
    if (legacy_err != ENOENT) open_failed(dir_fd, raw, legacy_err, dir / raw, path, expected);
  }
  open_failed(dir_fd, encoded, err, dir / encoded, path, expected);
}

// One node's directory, open, with its metadata.
struct NodeDir {
  detail::FileDescriptor fd;
  fs::path dir;
  Path path;
  detail::NodeMeta meta;
  int depth = 0;
};

detail::NodeMeta read_meta(int dir_fd, const fs::path& dir, const Path& path) {
  const std::string name(detail::kMetaFileName);
  const fs::path file = dir / name;
  // O_NONBLOCK: opening a FIFO planted in place of meta.json must fail below, not wait for a writer.
  auto [fd, err] = detail::open_at(dir_fd, name, O_RDONLY | O_NONBLOCK);
  if (!fd.valid()) open_failed(dir_fd, name, err, file, path, "a regular file");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) TT_OS_ERROR("fstat", file);
  if (!S_ISREG(st.st_mode)) corrupt(file, path, "is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > detail::kMaxMetaBytes) corrupt(file, path, "is too large for metadata");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  detail::read_all(fd.get(), text.data(), text.size(), file);
  return detail::parse_node_meta(text, file);
}

// The root directory, open. The root is the caller's choice: a link to it is followed (links
// inside the tree are not).
detail::FileDescriptor open_root_dir(const fs::path& dir) {
  auto [fd, err] = detail::open_at(AT_FDCWD, dir.string(), O_RDONLY | O_DIRECTORY);
  if (!fd.valid() && err == ELOOP) {
    std::error_code ec;
    const fs::path target = fs::canonical(dir, ec);
    if (!ec) std::tie(fd, err) = detail::open_at(AT_FDCWD, target.string(), O_RDONLY | O_DIRECTORY);
  }
  if (!fd.valid()) {
    throw InvalidArgument(fmt::format("load_memmap: no memmap tree at '{}': {}", dir.string(), std::strerror(err)));
  }
  return std::move(fd);
}

NodeDir open_child(const NodeDir& parent, const std::string& key) {
  Path path = parent.path;
  path.push_back(key);
  if (parent.depth + 1 > kMaxDepth) corrupt(parent.dir, path, "nests deeper than any tree this library loads");
  auto [fd, dir] = open_entry(parent.fd.get(), parent.dir, key, "", O_RDONLY | O_DIRECTORY, path, "a directory");
  detail::NodeMeta meta = read_meta(fd.get(), dir, path);
  if (!starts_with(meta.batch_size, parent.meta.batch_size)) {
    corrupt(dir / detail::kMetaFileName, path,
            fmt::format("has batch size {}, which does not start with its parent's {}", shape_str(meta.batch_size),
                        shape_str(parent.meta.batch_size)));
  }
  return {std::move(fd), std::move(dir), std::move(path), std::move(meta), parent.depth + 1};
}

NodeDir open_sub_tree(detail::FileDescriptor root_fd, const fs::path& dir, const Path& sub_path) {
  detail::NodeMeta root_meta = read_meta(root_fd.get(), dir, {});
  NodeDir node{std::move(root_fd), dir, {}, std::move(root_meta), 0};
  for (const std::string& key : sub_path) {
    const auto& entries = node.meta.entries;
    const auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.key == key; });
    if (it == entries.end() || !it->is_node) {
      throw InvalidArgument(fmt::format("load_memmap: '{}' has no sub-tree '{}' ({}'{}')", dir.string(),
                                        path_str(sub_path), it == entries.end() ? "no key " : "a leaf at ", key));
    }
    node = open_child(node, key);
  }
  return node;
}

struct DirIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};

DirIdentity identity_of(int fd, const fs::path& dir) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) TT_OS_ERROR("fstat", dir);
  return {st.st_dev, st.st_ino};
}

bool replaced_since(const DirIdentity& opened, const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return true;
  return st.st_dev != opened.dev || st.st_ino != opened.ino;
}

// Runs fn(node at sub_path). A save replacing the tree meanwhile deletes the files of the tree
// being read, which looks like a missing file: then the new tree is read instead.
template <class Fn>
auto with_sub_tree(const fs::path& dir, const Path& sub_path, Fn&& fn) {
  constexpr int kAttempts = 16;
  for (int attempt = 1;; ++attempt) {
    detail::FileDescriptor root_fd = open_root_dir(dir);
    const DirIdentity opened = identity_of(root_fd.get(), dir);
    try {
      return fn(open_sub_tree(std::move(root_fd), dir, sub_path));
    } catch (const CorruptData&) {
      if (attempt == kAttempts || !replaced_since(opened, dir)) throw;
    }
  }
}

// ---- leaves ----------------------------------------------------------------------------------

struct LeafFile {
  detail::FileDescriptor fd;
  fs::path file;
  std::int64_t size = -1;  // -1: not a regular file
};

LeafFile open_leaf(const NodeDir& node, const detail::MetaEntry& entry, bool writable) {
  Path path = node.path;
  path.push_back(entry.key);
  // O_NONBLOCK: a FIFO in place of a leaf file is refused below instead of blocking the open.
  auto [fd, file] = open_entry(node.fd.get(), node.dir, entry.key, std::string(detail::kMemmapSuffix),
                               (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK, path, "a regular file");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) TT_OS_ERROR("fstat", file);
  const std::int64_t size = S_ISREG(st.st_mode) ? static_cast<std::int64_t>(st.st_size) : -1;
  return {std::move(fd), std::move(file), size};
}

std::string size_problem(const LeafFile& leaf, const detail::MetaEntry& entry, std::uint64_t nbytes) {
  if (leaf.size < 0) return "is not a regular file";
  return fmt::format("holds {} bytes, expected {} ({} {}; {})", leaf.size, nbytes, entry.dtype, shape_str(entry.shape),
                     leaf.size < static_cast<std::int64_t>(nbytes) ? "truncated" : "too long");
}

struct LoadState {
  bool writable = false;
  bool random_access = false;
};

Tensor map_leaf(const NodeDir& node, const detail::MetaEntry& entry, const LoadState& state) {
  const bool writable = state.writable;
  Path path = node.path;
  path.push_back(entry.key);
  const std::uint64_t nbytes = detail::leaf_nbytes(entry.dtype, entry.shape, path_str(path));
  // A leaf of no bytes reads nothing from its file, and TensorDict writes none for it.
  if (nbytes == 0) return Tensor::empty(entry.shape, {entry.dtype});
  LeafFile leaf = open_leaf(node, entry, writable);
  if (leaf.size != static_cast<std::int64_t>(nbytes)) corrupt(leaf.file, path, size_problem(leaf, entry, nbytes));
  if (nbytes > SIZE_MAX) corrupt(leaf.file, path, "is larger than this machine's address space");
  detail::Mapping mapping(leaf.fd.get(), static_cast<std::size_t>(nbytes), writable, leaf.file);
  if (state.random_access && ::madvise(mapping.data(), mapping.size(), MADV_RANDOM) != 0) {
    TT_OS_ERROR("madvise", leaf.file);
  }
  const std::size_t size = mapping.size();
  StoragePtr storage = Storage::adopt(mapping.data(), size, Device::cpu(), [size](void* p) { ::munmap(p, size); });
  mapping.release();
  return Tensor(std::move(storage), 0, entry.dtype, entry.shape, contiguous_strides(entry.shape));
}

TensorTree load_node(const NodeDir& node, const LoadState& state) {
  TensorTree tree(node.meta.batch_size);
  for (const detail::MetaEntry& entry : node.meta.entries) {
    if (entry.is_node) {
      tree.set(Path{entry.key}, load_node(open_child(node, entry.key), state));
      continue;
    }
    tree.set(Path{entry.key}, map_leaf(node, entry, state));
  }
  return tree;
}

// ---- loading into one block ----------------------------------------------------------------------

// Every leaf of the tree at `root` in one block, or in the leaves of a tree given to read into: the
// directories are walked first (each stays open until the reading ends, one descriptor per node),
// then the leaf files are read by the chunks that overlap them, each opened, checked and closed by
// the thread that reads it.
class BlockLoad {
 public:
  explicit BlockLoad(const NodeDir& root)
      : root_(root), image_([this](std::size_t index) { return open_file(index); }) {
    collect(root);
  }
  BlockLoad(const BlockLoad&) = delete;
  BlockLoad& operator=(const BlockLoad&) = delete;

  const detail::BlockImage& image() const { return image_; }

  // The tree with every leaf a view of `block` (which holds the image) on its device.
  TensorTree tree(const StoragePtr& block) const {
    std::size_t child = 0;
    std::size_t leaf = 0;
    return build(root_, block, child, leaf);
  }

  // Where each file leaf's bytes go in `out`, by file index: its leaf of the same key, which must
  // be contiguous on the CPU with the saved dtype and shape. InvalidArgument naming the first key
  // that differs, or that only one of the two has.
  std::vector<std::byte*> destinations_in(const TensorTree& out) const {
    std::vector<std::byte*> destinations(files_.size());
    for (const Leaf& leaf : leaves_) {
      const Path key = key_of(leaf);
      if (!out.contains(key)) refuse_out(key, "the tree to read into has no such leaf");
      const Tensor& target = out.get(key);
      if (target.dtype() != leaf.entry->dtype || target.shape() != leaf.entry->shape) {
        refuse_out(key, fmt::format("saved as {} {}, the tree to read into holds {} {}", leaf.entry->dtype,
                                    shape_str(leaf.entry->shape), target.dtype(), shape_str(target.shape())));
      }
      if (!target.device().is_cpu() || !target.is_contiguous()) {
        refuse_out(key, "the tree to read into must hold it contiguous on the CPU");
      }
      if (leaf.file != kNoFile) destinations[leaf.file] = static_cast<std::byte*>(target.data_ptr());
    }
    if (out.leaves().size() != leaves_.size()) {
      out.for_each_leaf([&](const Path& key, const Tensor&) {
        const bool saved = std::any_of(leaves_.begin(), leaves_.end(), [&](const Leaf& l) { return key_of(l) == key; });
        if (!saved) refuse_out(key, "the saved tree has no such leaf");
      });
    }
    return destinations;
  }

 private:
  static constexpr std::size_t kNoFile = SIZE_MAX;  // a leaf of no bytes: TensorDict writes no file
  struct Leaf {
    const NodeDir* node;
    const detail::MetaEntry* entry;
    std::uint64_t nbytes;
    std::size_t offset;
    std::size_t file;  // its index in the image, or kNoFile
  };

  // Depth first, in meta.json's order: build() walks the same way.
  void collect(const NodeDir& node) {
    for (const detail::MetaEntry& entry : node.meta.entries) {
      if (entry.is_node) {
        children_.push_back(open_child(node, entry.key));
        collect(children_.back());
        continue;
      }
      Path path = node.path;
      path.push_back(entry.key);
      Leaf leaf{&node, &entry, detail::leaf_nbytes(entry.dtype, entry.shape, path_str(path)), 0, kNoFile};
      if (leaf.nbytes > 0) {
        leaf.file = files_.size();
        files_.push_back(leaves_.size());
        leaf.offset = image_.add_file(leaf.nbytes, leaf.file);
      }
      leaves_.push_back(leaf);
    }
  }

  // The leaf's key in the loaded tree (below the sub-tree asked for).
  Path key_of(const Leaf& leaf) const {
    Path key(leaf.node->path.begin() + static_cast<std::ptrdiff_t>(root_.path.size()), leaf.node->path.end());
    key.push_back(leaf.entry->key);
    return key;
  }

  [[noreturn]] void refuse_out(const Path& key, std::string_view why) const {
    throw InvalidArgument(fmt::format("load_memmap into a tree: key '{}' of '{}': {}", path_str(key),
                                      root_.dir.string(), why));
  }

  detail::OpenedFile open_file(std::size_t index) const {
    const Leaf& leaf = leaves_[files_[index]];
    LeafFile file = open_leaf(*leaf.node, *leaf.entry, false);
    if (file.size != static_cast<std::int64_t>(leaf.nbytes)) {
      Path path = leaf.node->path;
      path.push_back(leaf.entry->key);
      corrupt(file.file, path, size_problem(file, *leaf.entry, leaf.nbytes));
    }
    return {std::move(file.fd), std::move(file.file)};
  }

  TensorTree build(const NodeDir& node, const StoragePtr& block, std::size_t& child, std::size_t& next) const {
    TensorTree tree(node.meta.batch_size);
    const Device device = block->device();
    for (const detail::MetaEntry& entry : node.meta.entries) {
      if (entry.is_node) {
        tree.set(Path{entry.key}, build(children_[child++], block, child, next));
        continue;
      }
      const Leaf& leaf = leaves_[next++];
      tree.set(Path{entry.key}, leaf.file == kNoFile
                                    ? Tensor::empty(entry.shape, {entry.dtype, device})
                                    : Tensor(block, leaf.offset, entry.dtype, entry.shape, contiguous_strides(entry.shape)));
    }
    return tree;
  }

  const NodeDir& root_;
  std::deque<NodeDir> children_;  // every node below the root, depth first (a deque: they stay put)
  std::vector<Leaf> leaves_;      // every leaf, depth first
  std::vector<std::size_t> files_;  // the leaves with bytes, by their index in the image
  detail::BlockImage image_;
};

// Host memory for a block that is about to be written whole: in huge pages where the kernel has
// them to give (transparent huge pages), since faulting in a fresh block 4 KiB at a time costs more
// than reading the files into it.
StoragePtr allocate_host_block(std::size_t nbytes) {
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  if (nbytes < kHugePage) return Storage::allocate(nbytes, Device::cpu());
  const std::size_t mapped = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) TT_OS_ERROR("mmap", "(a block for a tree)");
  ::madvise(data, mapped, MADV_HUGEPAGE);  // a hint: without huge pages the block works all the same
  return Storage::adopt(data, nbytes, Device::cpu(), [mapped](void* p) { ::munmap(p, mapped); });
}

TensorTree load_into_block(const NodeDir& root, Device device, std::size_t chunk_bytes) {
  const BlockLoad load(root);
  if (device.is_cuda()) return load.tree(detail::upload_image(load.image(), device, chunk_bytes));
  const StoragePtr block = allocate_host_block(load.image().total_bytes());
  detail::read_image(load.image(), block->data(), chunk_bytes);
  return load.tree(block);
}

TensorTree load_into_tree(const NodeDir& root, const TensorTree& out, std::size_t chunk_bytes) {
  const BlockLoad load(root);
  load.image().read_files(load.destinations_in(out), chunk_bytes);
  return out;
}

void list_node(const NodeDir& node, MemmapListing& out) {
  out.entries.push_back({node.path, true, node.meta.batch_size, DType::Float32, 0, -1, node.dir});
  for (const detail::MetaEntry& entry : node.meta.entries) {
    if (entry.is_node) {
      list_node(open_child(node, entry.key), out);
      continue;
    }
    MemmapEntryInfo info{node.path, false, entry.shape, entry.dtype, 0, -1, {}};
    info.path.push_back(entry.key);
    info.nbytes = detail::leaf_nbytes(entry.dtype, entry.shape, path_str(info.path));
    info.file = node.dir / detail::leaf_file_name(entry.key);
    if (info.nbytes == 0) {  // loading never opens its file, which TensorDict does not write
      out.entries.push_back(std::move(info));
      continue;
    }
    try {
      LeafFile leaf = open_leaf(node, entry, false);
      info.file = leaf.file;
      info.file_bytes = leaf.size;
      if (leaf.size != static_cast<std::int64_t>(info.nbytes)) {
        std::string problem = describe(leaf.file, info.path);
        problem += ' ';
        problem += size_problem(leaf, entry, info.nbytes);
        out.problems.push_back(std::move(problem));
      }
    } catch (const CorruptData& e) {
      out.problems.emplace_back(e.what());
    }
    out.entries.push_back(std::move(info));
  }
}

}  // namespace

TensorTree TensorTree::load_memmap(const fs::path& dir, const LoadMemmapOptions& options) {
  if (options.out) {
    if (options.device.is_cuda()) {
      throw InvalidArgument("load_memmap: a tree to read into is read on the CPU; copy it to the device afterwards");
    }
    return with_sub_tree(dir, options.sub_path,
                         [&](const NodeDir& root) { return load_into_tree(root, *options.out, options.staging_bytes); });
  }
  if (options.mode == MemmapMode::Copy || options.device.is_cuda()) {
    const Device device = options.device.is_cuda() ? resolve_device(options.device) : Device::cpu();
    return with_sub_tree(dir, options.sub_path,
                         [&](const NodeDir& root) { return load_into_block(root, device, options.staging_bytes); });
  }
  const LoadState state{options.mode == MemmapMode::ReadWrite, options.random_access};
  return with_sub_tree(dir, options.sub_path, [&](const NodeDir& root) { return load_node(root, state); });
}

MemmapListing list_memmap(const fs::path& dir, const Path& sub_path) {
  return with_sub_tree(dir, sub_path, [](const NodeDir& root) {
    MemmapListing listing;
    list_node(root, listing);
    return listing;
  });
}

// ---- TensorTree's members (memmap_ and memmap_like are in memmap_save.cpp) ----------------------

TensorTree TensorTree::load_memmap(const std::filesystem::path& dir) { return load_memmap(dir, LoadMemmapOptions{}); }

}  // namespace tensortree
