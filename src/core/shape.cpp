#include "tensortree/shape.hpp"

#include <algorithm>
#include <optional>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

std::int64_t numel_of(std::span<const std::int64_t> shape) {
  std::optional<std::int64_t> n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) throw InvalidArgument(fmt::format("negative dimension in shape {}", shape_str(shape)));
    n = detail::checked_mul(*n, d);
    if (!n) throw InvalidArgument(fmt::format("element count of shape {} overflows int64", shape_str(shape)));
  }
  return *n;
}

Strides contiguous_strides(std::span<const std::int64_t> shape) {
  Strides strides(shape.size());
  std::optional<std::int64_t> stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = *stride;
    // Zero-size dimensions count as 1 (as in PyTorch), so numel_of alone cannot rule out overflow.
    stride = detail::checked_mul(*stride, std::max<std::int64_t>(shape[i], 1));
    if (!stride) throw InvalidArgument(fmt::format("strides of shape {} overflow int64", shape_str(shape)));
  }
  return strides;
}

std::string shape_str(std::span<const std::int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

bool starts_with(std::span<const std::int64_t> shape, std::span<const std::int64_t> prefix) {
  return prefix.size() <= shape.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}

}  // namespace tensortree
