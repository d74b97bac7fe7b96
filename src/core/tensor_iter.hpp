// Element-wise loops over strided CPU tensors of one (broadcast) shape, shared by where,
// masked_fill_ and allclose: a C-order odometer that carries one element offset per operand.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/shape.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// NumPy's broadcasting rule: shapes aligned at the trailing end, each pair equal or one of them 1.
inline Shape broadcast_shapes(const char* operation, std::span<const Shape* const> shapes) {
  std::size_t ndim = 0;
  for (const Shape* shape : shapes) ndim = std::max(ndim, shape->size());
  Shape out(ndim, 1);
  for (const Shape* shape : shapes) {
    const std::size_t lead = ndim - shape->size();
    for (std::size_t d = 0; d < shape->size(); ++d) {
      const std::int64_t size = (*shape)[d];
      std::int64_t& target = out[lead + d];
      if (size == target || size == 1) continue;
      if (target != 1) {
        const auto listed = shapes | std::views::transform([](const Shape* s) { return shape_str(*s); });
        throw InvalidArgument(fmt::format("{}: shapes {} do not broadcast", operation, fmt::join(listed, ", ")));
      }
      target = size;
    }
  }
  return out;
}

// fn(offsets) for every index of `shape` in C order, offsets[k] being the element offset of that
// index in operand k (strides already broadcast to `shape`, 0 along stretched dimensions).
template <std::size_t N, class Fn>
void for_each_offset(const Shape& shape, const std::array<Strides, N>& strides, Fn&& fn) {
  for (const std::int64_t size : shape) {
    if (size == 0) return;
  }
  const std::size_t ndim = shape.size();
  std::vector<std::int64_t> index(ndim, 0);
  std::array<std::int64_t, N> offsets{};
  while (true) {
    fn(static_cast<const std::array<std::int64_t, N>&>(offsets));
    std::size_t d = ndim;
    while (d > 0) {
      --d;
      if (++index[d] < shape[d]) {
        for (std::size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
        break;
      }
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= (shape[d] - 1) * strides[k][d];
      index[d] = 0;
      if (d == 0) return;
    }
    if (ndim == 0) return;
  }
}

}  // namespace tensortree::detail
