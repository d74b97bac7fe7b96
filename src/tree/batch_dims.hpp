// Batch-dimension arithmetic shared by TensorTree's shape, mask and reduction methods: every leaf
// and sub-tree shape starts with the root's batch_size, so each op rewrites that prefix and keeps
// the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensortree/shape.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// `dim` among `count` positions (negative from the end); InvalidArgument naming the operation and
// the batch_size otherwise.
std::int64_t wrap_batch_dim(const char* operation, std::int64_t dim, std::int64_t count, const Shape& batch_size);

// `shape` with its first `prefix_len` dimensions replaced by `prefix`.
Shape replace_prefix(const Shape& shape, std::size_t prefix_len, const Shape& prefix);

// `requested` with its one -1 inferred so that it holds as many elements as `batch_size`;
// InvalidArgument when no shape fits.
Shape infer_batch_shape(const char* operation, Shape requested, const Shape& batch_size);

// The permutation of a whole leaf (`ndim` dimensions) that applies `batch_perm` to its first
// batch dimensions; checks that `batch_perm` is a permutation of 0..batch_dims-1.
std::vector<std::int64_t> leaf_permutation(std::span<const std::int64_t> batch_perm, std::int64_t batch_dims,
                                           std::int64_t ndim, const Shape& batch_size);

// Checks a bool mask over leading batch dimensions: its shape is batch_size's first mask.dim()
// sizes, with at least one dimension.
void check_batch_mask(const char* operation, const Tensor& mask, const Shape& batch_size);

// The mask as a view of `ndim` dimensions (trailing ones added) that broadcasts over a leaf.
Tensor mask_for_leaf(const Tensor& mask, std::int64_t ndim);

// Lengths of pieces of `size` rows covering `total` (the last one shorter), as torch.split.
std::vector<std::int64_t> split_lengths(const char* operation, std::int64_t total, std::int64_t size);

}  // namespace tensortree::detail
