// What the library alone may do to a Tensor: the one friend of Tensor, kept out of the public
// header because it skips the checks every public constructor makes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tensortree/tensor.hpp"

namespace tensortree::detail {

struct TensorAccess {
  // Makes `out` a contiguous view of `like`'s dtype and shape at `byte_offset` of `storage`,
  // without checking that it fits: for views a layout plan placed (consolidate builds one per leaf,
  // and the checks cost as much as the rest). Assigns in place, so the shape's inline storage is
  // copied once.
  static void planned_view(Tensor& out, const StoragePtr& storage, std::size_t byte_offset, const Tensor& like) {
    out.storage_ = storage;
    out.byte_offset_ = byte_offset;
    out.dtype_ = like.dtype_;
    out.shape_ = like.shape_;
    out.strides_.resize(out.shape_.size());
    std::int64_t stride = 1;
    for (std::size_t d = out.shape_.size(); d-- > 0;) {
      out.strides_[d] = stride;
      // As contiguous_strides: a zero-size dimension counts as 1; an overflow is its error.
      if (__builtin_mul_overflow(stride, std::max<std::int64_t>(out.shape_[d], 1), &stride)) {
        out.strides_ = contiguous_strides(out.shape_);
      }
    }
  }
};

}  // namespace tensortree::detail
