// Slice: the rows start, start+step, ... below stop of one dimension, as Python's start:stop:step.
// Tensor::slice and TensorTree::slice both take (dim, Slice), so a dimension and a bound cannot be
// swapped by accident: slice(0, {2, 8, 2}).
#pragma once

#include <cstdint>
#include <optional>

namespace tensortree {

struct Slice {
  // May be negative (counted from the end); clamped to the dimension like Python's.
  std::int64_t start = 0;
  // Exclusive; none: to the end.
  std::optional<std::int64_t> stop;
  // Positive.
  std::int64_t step = 1;
};

}  // namespace tensortree
