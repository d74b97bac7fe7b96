// How a tree's leaves sit in one consolidated buffer, and the envelope that carries that description
// between processes.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/export.hpp"
#include "tensortree/path.hpp"
#include "tensortree/path_list.hpp"
#include "tensortree/shape.hpp"

namespace tensortree {

// One node of the tree; the root has the empty path.
struct NodeSpec {
  Path path;
  Shape batch_size;
  std::vector<std::string> keys;  // direct children (leaves and sub-nodes) in insertion order

  friend bool operator==(const NodeSpec&, const NodeSpec&) = default;
};

// One leaf: where its C-order bytes sit in the consolidated buffer. Its path is kept by the schema
// with every other leaf's, in one key arena (Schema::path_of).
struct LeafSpec {
  DType dtype = DType::Float32;
  Shape shape;
  std::uint64_t offset = 0;
  std::uint64_t nbytes = 0;

  friend bool operator==(const LeafSpec&, const LeafSpec&) = default;
};

// What plan() needs to know about a leaf.
struct LeafPlan {
  Path path;
  DType dtype = DType::Float32;
  Shape shape;
};

// The leaves of one dtype, contiguous in layout order and in the buffer: a reduction is one call per bucket.
struct DTypeBucket {
  DType dtype = DType::Float32;
  std::uint64_t offset = 0;  // first leaf's start
  std::uint64_t nbytes = 0;  // from the first leaf's start to the last leaf's end
  std::size_t first_leaf = 0;  // index into Schema::leaves()
  std::size_t leaf_count = 0;

  friend bool operator==(const DTypeBucket&, const DTypeBucket&) = default;
};

// Envelope written by encode() (integers little-endian):
//   [0, 4)   magic "TTSC"
//   [4, 8)   format version (kFormatVersion)
//   [8, 16)  payload length; the envelope is exactly header + payload
//   [16, 24) XXH3-64 of the payload
//   [24, ..) payload: little-endian fields back to back, without padding:
//              u8 storage device, u64 total_bytes,
//              u64 node count, then per node (path order): path, batch_size, keys
//              u64 leaf count, then per leaf (layout order): path, u8 dtype, shape, u64 offset, u64 nbytes
//            where a path or key list is a u64 count of strings, a string is a u64 length and its bytes,
//            and a shape is a u64 rank and i64 dimensions.
class TT_API Schema {
 public:
  static constexpr std::uint32_t kFormatVersion = 1;
  static constexpr std::uint64_t kAlignment = 64;

  static constexpr std::uint32_t kMagic = 0x43535454;  // "TTSC" read as a little-endian u32
  static constexpr std::size_t kHeaderBytes = 24;

  // Bounds that every schema obeys; decode() rejects anything beyond them before allocating.
  static constexpr std::size_t kMaxRank = 16;
  static constexpr std::size_t kMaxDepth = 64;
  static constexpr std::size_t kMaxKeyBytes = 4096;
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 24;  // nodes, leaves, keys of one node

  // Canonical layout: leaves grouped by dtype bucket (DType enum order), within a bucket sorted by path
  // (lexicographic over keys), each leaf at the next multiple of 64 bytes after the previous one;
  // total_bytes rounded up to 64. `nodes` must include the root (empty path); any order is accepted.
  // Throws InvalidArgument (naming the path) if the description is inconsistent.
  static Schema plan(std::vector<NodeSpec> nodes, std::vector<LeafPlan> leaves, DeviceType storage_device);

  const std::vector<NodeSpec>& nodes() const { return nodes_; }     // sorted by path; root first
  const std::vector<LeafSpec>& leaves() const { return leaves_; }   // layout order
  // The path of leaves()[index]; a view into this schema, valid while it lives.
  PathView leaf_path(std::size_t index) const { return leaf_paths_[index]; }
  // The path of `leaf`, which must be an element of leaves() (one that find_leaf returned, say).
  PathView path_of(const LeafSpec& leaf) const {
    assert(&leaf >= leaves_.data() && &leaf < leaves_.data() + leaves_.size());
    return leaf_paths_[static_cast<std::size_t>(&leaf - leaves_.data())];
  }
  const std::vector<DTypeBucket>& buckets() const { return buckets_; }  // DType enum order
  std::uint64_t total_bytes() const { return total_bytes_; }
  DeviceType storage_device() const { return storage_device_; }
  // XXH3-64 of the layout (leaf paths, dtypes, shapes, offsets, sizes; node paths and batch sizes;
  // total bytes): independent of key insertion order and of the storage device.
  std::uint64_t fingerprint() const { return fingerprint_; }

  // nullptr when absent; O(log n).
  const LeafSpec* find_leaf(const Path& path) const;
  const LeafSpec* find_leaf(PathView path) const;
  const NodeSpec* find_node(const Path& path) const;
  const NodeSpec* find_node(PathView path) const;
  const DTypeBucket* find_bucket(DType dtype) const;

  std::vector<std::byte> encode() const;
  // Bytes from a peer or a file: any violation of the envelope or of a schema invariant is CorruptData.
  static Schema decode(std::span<const std::byte> bytes);

  friend TT_API bool operator==(const Schema& a, const Schema& b);

 private:
  // Validates every invariant (InvalidArgument naming the offending path), then derives buckets,
  // the path index and the fingerprint. leaf_paths[i] is the path of leaves[i].
  Schema(std::vector<NodeSpec> nodes, std::vector<LeafSpec> leaves, PathList leaf_paths, std::uint64_t total_bytes,
         DeviceType storage_device);

  std::vector<NodeSpec> nodes_;
  std::vector<LeafSpec> leaves_;
  PathList leaf_paths_;  // parallel to leaves_
  std::vector<DTypeBucket> buckets_;
  std::vector<std::uint32_t> leaves_by_path_;  // indices into leaves_, sorted by path
  std::uint64_t total_bytes_ = 0;
  DeviceType storage_device_ = DeviceType::CPU;
  std::uint64_t fingerprint_ = 0;
};

}  // namespace tensortree
