#include "transport/mpi/mpi_datatypes.hpp"

#include <climits>
#include <string>

#include "core/text_format.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

MPI_Datatype element_datatype(DType dtype) {
  switch (dtype) {
    case DType::Bool: return MPI_C_BOOL;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::UInt16: return MPI_UINT16_T;
    case DType::UInt32: return MPI_UINT32_T;
    case DType::UInt64: return MPI_UINT64_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float16: return MPI_UINT16_T;
    case DType::BFloat16: return MPI_UINT16_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Complex64: return MPI_C_FLOAT_COMPLEX;
    case DType::Complex128: return MPI_C_DOUBLE_COMPLEX;
    case DType::Float8_e4m3fn: return MPI_UINT8_T;
    case DType::Float8_e5m2: return MPI_UINT8_T;
  }
  throw_invalid_dtype(dtype);
}

// ---- derived datatypes for counts beyond max_count --------------------------------------------------

namespace {

MpiDatatype committed(MpiDatatype datatype) {
  MPI_Datatype raw = datatype.get();
  TT_MPI_CHECK(MPI_Type_commit(&raw));
  return datatype;
}

}  // namespace

MpiDatatype contiguous_datatype(std::int64_t elements, MPI_Datatype element, std::int64_t max_count) {
  const std::int64_t full_chunks = elements / max_count;
  const std::int64_t rest = elements % max_count;
  if (full_chunks > INT_MAX) {
    throw NotSupported(fmt::format("mpi backend cannot describe {} elements in one message", elements));
  }
  MPI_Aint lower_bound = 0;
  MPI_Aint extent = 0;
  TT_MPI_CHECK(MPI_Type_get_extent(element, &lower_bound, &extent));
  const int chunk = static_cast<int>(max_count);
  MPI_Datatype raw = MPI_DATATYPE_NULL;
  TT_MPI_CHECK(MPI_Type_vector(static_cast<int>(full_chunks), chunk, chunk, element, &raw));
  const MpiDatatype chunks(raw);
  TT_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(rest), element, &raw));
  const MpiDatatype tail(raw);
  int lengths[2] = {1, 1};
  MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(full_chunks * max_count) * extent};
  MPI_Datatype parts[2] = {chunks.get(), tail.get()};
  TT_MPI_CHECK(MPI_Type_create_struct(rest > 0 ? 2 : 1, lengths, displacements, parts, &raw));
  const MpiDatatype joined(raw);
  TT_MPI_CHECK(MPI_Type_create_resized(joined.get(), 0, static_cast<MPI_Aint>(elements) * extent, &raw));
  return committed(MpiDatatype(raw));
}

MpiDatatype positioned_datatype(std::int64_t offset, std::int64_t elements, MPI_Datatype element,
                                std::int64_t max_count) {
  MPI_Datatype raw = MPI_DATATYPE_NULL;
  MpiDatatype block;
  if (elements <= max_count) {
    TT_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(elements), element, &raw));
    block = MpiDatatype(raw);
  } else {
    block = contiguous_datatype(elements, element, max_count);
  }
  MPI_Aint lower_bound = 0;
  MPI_Aint extent = 0;
  TT_MPI_CHECK(MPI_Type_get_extent(element, &lower_bound, &extent));
  int length = 1;
  MPI_Aint displacement = static_cast<MPI_Aint>(offset) * extent;
  MPI_Datatype inner = block.get();
  TT_MPI_CHECK(MPI_Type_create_struct(1, &length, &displacement, &inner, &raw));
  return committed(MpiDatatype(raw));
}

}  // namespace tensortree::detail
