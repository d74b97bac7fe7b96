// What packing moves: one segment per leaf, between the leaf's own memory and its place in the
// consolidated buffer. Plain structs, shared by the CPU engine and the CUDA kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/strided_view.hpp"

namespace tensortree::detail {

enum class PackDirection : std::uint8_t {
  Pack,    // leaves -> buffer
  Unpack,  // buffer -> leaves
};

struct PackSegment {
  std::byte* leaf_data = nullptr;    // the leaf's element 0
  std::uint64_t buffer_offset = 0;   // where its bytes start in the buffer (64-byte aligned)
  std::uint64_t nbytes = 0;          // numel * itemsize
  std::int32_t strided_index = -1;   // -1: the leaf is dense; else its view in the strided list
  std::uint32_t itemsize = 1;
};

}  // namespace tensortree::detail
