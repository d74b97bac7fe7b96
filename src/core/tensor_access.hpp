// What the library alone may do to a Tensor: the one friend of Tensor, kept out of the public
// header because it skips the checks every public constructor makes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tensortree/tensor.hpp"

namespace tensortree::detail {

struct TensorAccess {
  // Makes `out` a contiguous view of `dtype` and `shape` at `byte_offset` of `storage`, without
  // checking that it fits: for views a layout plan or a validated Schema placed inside a buffer
  // known to hold them (consolidate and from_consolidated build one per leaf, and the checks cost as
  // much as the rest). Assigns in place, so the shape's inline storage is copied once.
  static void planned_view(Tensor& out, const StoragePtr& storage, std::size_t byte_offset, DType dtype,
                           const Shape& shape) {
    out.storage_ = storage;
    out.byte_offset_ = byte_offset;
    out.dtype_ = dtype;
    out.shape_ = shape;
    out.strides_.resize(shape.size());
    std::int64_t stride = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      out.strides_[d] = stride;
      // As contiguous_strides: a zero-size dimension counts as 1; an overflow is its error.
      if (__builtin_mul_overflow(stride, std::max<std::int64_t>(shape[d], 1), &stride)) {
        out.strides_ = contiguous_strides(shape);
      }
    }
  }
  // The same view with `like`'s dtype and shape.
  static void planned_view(Tensor& out, const StoragePtr& storage, std::size_t byte_offset, const Tensor& like) {
    planned_view(out, storage, byte_offset, like.dtype_, like.shape_);
  }
};

}  // namespace tensortree::detail
