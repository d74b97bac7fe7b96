// The schema fingerprint: a 64-bit hash of the canonical bytes of a layout (format version, every
// leaf's path, dtype, shape, offset and size, every node's path and batch size, the total size).
#pragma once

#include <cstdint>
#include <span>

#include "tensortree/schema.hpp"

namespace tensortree::detail {

std::uint64_t layout_fingerprint(std::span<const NodeSpec> nodes, std::span<const LeafSpec> leaves,
                                 const PathList& paths, std::uint64_t total_bytes);

}  // namespace tensortree::detail
