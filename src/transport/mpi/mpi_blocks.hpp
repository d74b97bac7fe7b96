// How a tensor's elements are described to MPI: as one (count, datatype) even beyond int counts,
// in chunks of at most max_count elements for reductions (which cannot use derived datatypes), and
// as placed blocks for all_to_all.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/mpi/mpi_work.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// A count and datatype that describe some elements as one message.
struct Block {
  int count;
  MPI_Datatype datatype;
};

// `elements` elements of `dtype`; a derived datatype it needs is kept by `work`.
Block block_of(std::int64_t elements, DType dtype, std::int64_t max_count, MpiWork& work);

std::byte* element_at(const Tensor& tensor, std::int64_t element);

// Calls post(first element, count) for consecutive chunks of at most max_count elements (once for
// an empty tensor, so every rank posts the same number of calls).
template <class Post>
void for_each_chunk(std::int64_t elements, std::int64_t max_count, Post&& post) {
  std::int64_t offset = 0;
  do {
    const std::int64_t count = std::min(max_count, elements - offset);
    post(offset, static_cast<int>(count));
    offset += count;
  } while (offset < elements);
}

std::vector<std::int64_t> displacements_of(std::span<const std::int64_t> counts);

std::vector<int> as_ints(std::span<const std::int64_t> values);

// One side of an all_to_all in MPI_Ialltoallw's terms: per block, a count of 0 or 1 of a datatype
// that starts at the block's byte offset (so every displacement is 0).
struct PlacedBlocks {
  const int* counts;
  const MPI_Datatype* datatypes;
};

// The arrays and datatypes are kept by `work`.
PlacedBlocks placed_blocks(std::span<const std::int64_t> counts, MPI_Datatype element, std::int64_t max_count,
                           MpiWork& work);

}  // namespace tensortree::detail
