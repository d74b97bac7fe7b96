// meta.json: one per node of a memmap tree, in TensorDict's format. Parsing treats the text as
// untrusted (CorruptData naming the file for anything malformed); formatting writes exactly what
// Python's json.dumps writes for TensorDict's metadata dict, key order included.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/dtype.hpp"
#include "tensortree/shape.hpp"

namespace tensortree::detail {

inline constexpr std::string_view kMetaFileName = "meta.json";
inline constexpr std::string_view kMemmapSuffix = ".memmap";
inline constexpr std::string_view kTensorDictType = "<class 'tensordict._td.TensorDict'>";
// A meta.json larger than this is not a node's metadata (a node of a million keys is ~100 MiB).
inline constexpr std::size_t kMaxMetaBytes = std::size_t{256} << 20;

struct MetaEntry {
  std::string key;
  bool is_node = false;
  DType dtype = DType::Float32;  // leaves only
  Shape shape;                   // leaves only
};

struct NodeMeta {
  std::vector<MetaEntry> entries;  // in the file's order (TensorDict's insertion order)
  Shape batch_size;
};

// Entries first in order, then "shape", "device", "_type", as TensorDict's _save_metadata leaves
// them; json.dumps separators (", " and ": ") and ASCII escapes. InvalidArgument for a key that is
// not valid UTF-8 or that collides with the node's own fields.
std::string format_node_meta(const NodeMeta& node);
// Checks every field: shapes are arrays of at most Schema::kMaxRank non-negative integers whose
// byte size fits in 64 bits, dtypes are known, each leaf's shape starts with the batch size.
NodeMeta parse_node_meta(std::string_view text, const std::filesystem::path& file);

// "<encoded key>.memmap"
std::string leaf_file_name(std::string_view key);
// Bytes a leaf of this dtype and shape occupies; CorruptData naming `what` on overflow.
std::uint64_t leaf_nbytes(DType dtype, const Shape& shape, std::string_view what);

}  // namespace tensortree::detail
