// Loading memmap trees: every directory and file is opened relative to its parent's descriptor
// without following links, every meta.json field is checked, and each leaf file is mapped (not
// read), so a loaded tree touches only the pages its reader touches.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "core/text_format.hpp"
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
  const LoadState state{options.mode == MemmapMode::ReadWrite, options.random_access};
  TensorTree mapped = with_sub_tree(dir, options.sub_path, [&](const NodeDir& root) { return load_node(root, state); });
  if (!options.device.is_cuda()) return mapped;
  return detail::upload_tree(mapped, resolve_device(options.device), options.staging_bytes);
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
