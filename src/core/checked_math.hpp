// Overflow-checked byte arithmetic: element counts times item sizes, rounding up to an alignment,
// and how far a strided view reaches. Shapes and sizes may come from a peer or a file, so every
// step is checked. Each function returns nullopt on overflow and leaves the error to its caller,
// which knows what to name (the key path, the rank, the file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace tensortree::detail {

// Where every consolidated leaf and every gathered block starts: a multiple of this many bytes.
inline constexpr std::uint64_t kByteAlignment = 64;

template <class T>
std::optional<T> checked_mul(T a, T b) {
  T product{};
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

template <class T>
std::optional<T> checked_add(T a, T b) {
  T sum{};
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// numel(shape) × itemsize as bytes that fit an int64; nullopt for a negative dimension as well.
inline std::optional<std::uint64_t> checked_nbytes(std::span<const std::int64_t> shape, std::size_t itemsize) {
  auto bytes = static_cast<std::int64_t>(itemsize);
  for (const std::int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, dim, &bytes)) return std::nullopt;
  }
  return static_cast<std::uint64_t>(bytes);
}

// `bytes` rounded up to a multiple of `alignment` (a power of two).
inline std::optional<std::uint64_t> checked_align_up(std::uint64_t bytes, std::uint64_t alignment = kByteAlignment) {
  std::uint64_t padded = 0;
  if (__builtin_add_overflow(bytes, alignment - 1, &padded)) return std::nullopt;
  return padded & ~(alignment - 1);
}

// Bytes from a view's first element to just past the last one it reaches; 0 for an empty view.
// Dimensions and strides must be non-negative (callers reject others with their own message).
inline std::optional<std::size_t> view_extent_bytes(std::span<const std::int64_t> shape,
                                                    std::span<const std::int64_t> strides, std::size_t itemsize) {
  for (const std::int64_t dim : shape) {
    if (dim == 0) return std::size_t{0};
  }
  std::int64_t last = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach) || __builtin_add_overflow(last, reach, &last)) {
      return std::nullopt;
    }
  }
  return checked_mul(static_cast<std::size_t>(last) + 1, itemsize);
}

}  // namespace tensortree::detail
