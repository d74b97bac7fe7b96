// The MPI datatypes of tensor elements, and the derived datatypes that describe more elements
// than one MPI count (an int) can, so that a message stays one message.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "transport/mpi/mpi_handles.hpp"
#include "tensortree/dtype.hpp"

namespace tensortree::detail {

// The MPI type of one element. The 16- and 8-bit floats travel as their bits; MPI cannot reduce
// them, so reductions use widening operations (mpi_reductions.hpp).
MPI_Datatype element_datatype(DType dtype);

// One datatype covering `elements` consecutive elements, whose extent is exactly their bytes (so
// that block r of a gather lands at r times the block size).
MpiDatatype contiguous_datatype(std::int64_t elements, MPI_Datatype element, std::int64_t max_count);

// `elements` consecutive elements starting `offset` elements into a buffer (alltoallw's blocks).
MpiDatatype positioned_datatype(std::int64_t offset, std::int64_t elements, MPI_Datatype element,
                                std::int64_t max_count);

}  // namespace tensortree::detail
