#include "cuda/cuda_messages.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::cuda {

void throw_unsupported_element_size(std::size_t itemsize) {
  throw InvalidArgument(fmt::format("strided copy of {}-byte elements is not supported", itemsize));
}

void throw_too_many_pack_chunks(std::uint64_t total_bytes, std::size_t max_chunks, std::size_t chunk_bytes) {
  throw InvalidArgument(fmt::format("cuda pack: {} bytes need more than {} chunks of {} bytes", total_bytes, max_chunks,
                                    chunk_bytes));
}

void throw_unsupported_kernel_dtype(const char* operation, std::uint8_t dtype) {
  throw NotSupported(fmt::format("{} of {} elements on a CUDA device: the element-wise kernels compute bool, "
                                 "integer, float16, bfloat16, float32 and float64 only",
                                 operation, static_cast<DType>(dtype)));
}

}  // namespace tensortree::cuda
