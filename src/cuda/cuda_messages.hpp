// The errors the .cu files throw, put into words by g++'s code: nvcc cannot compile {fmt} 9's
// headers, so the kernels' host code names what went wrong and cuda_messages.cpp formats it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensortree::cuda {

// InvalidArgument: a strided copy of elements of `itemsize` bytes, which no kernel moves.
[[noreturn]] void throw_unsupported_element_size(std::size_t itemsize);

// InvalidArgument: a pack of `total_bytes` that needs more than `max_chunks` chunks of `chunk_bytes`.
[[noreturn]] void throw_too_many_pack_chunks(std::uint64_t total_bytes, std::size_t max_chunks,
                                             std::size_t chunk_bytes);

// NotSupported: an element-wise kernel (`operation`) on elements of `dtype` (raw DType value), which
// the kernels do not compute (complex and float8).
[[noreturn]] void throw_unsupported_kernel_dtype(const char* operation, std::uint8_t dtype);

}  // namespace tensortree::cuda
