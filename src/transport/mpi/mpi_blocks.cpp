#include "transport/mpi/mpi_blocks.hpp"

#include <numeric>
#include <utility>

#include "transport/mpi/mpi_datatypes.hpp"

namespace tensortree::detail {

Block block_of(std::int64_t elements, DType dtype, std::int64_t max_count, MpiWork& work) {
  const MPI_Datatype element = element_datatype(dtype);
  if (elements <= max_count) return {static_cast<int>(elements), element};
  return {1, work.keep(contiguous_datatype(elements, element, max_count))};
}

std::byte* element_at(const Tensor& tensor, std::int64_t element) {
  return static_cast<std::byte*>(tensor.data_ptr()) + static_cast<std::size_t>(element) * tensor.itemsize();
}

std::vector<std::int64_t> displacements_of(std::span<const std::int64_t> counts) {
  std::vector<std::int64_t> displacements(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), displacements.begin(), std::int64_t{0});
  return displacements;
}

std::vector<int> as_ints(std::span<const std::int64_t> values) { return {values.begin(), values.end()}; }

PlacedBlocks placed_blocks(std::span<const std::int64_t> counts, MPI_Datatype element, std::int64_t max_count,
                           MpiWork& work) {
  std::vector<int> present;
  std::vector<MPI_Datatype> datatypes;
  std::int64_t offset = 0;
  for (const std::int64_t count : counts) {
    present.push_back(count > 0 ? 1 : 0);
    datatypes.push_back(work.keep(positioned_datatype(offset, count, element, max_count)));
    offset += count;
  }
  return {work.keep(std::move(present)), work.keep(std::move(datatypes))};
}

}  // namespace tensortree::detail
