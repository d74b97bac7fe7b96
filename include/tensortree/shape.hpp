// Shapes and strides (in elements), with overflow-checked arithmetic.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "tensortree/export.hpp"

namespace tensortree {

using Shape = std::vector<std::int64_t>;
using Strides = std::vector<std::int64_t>;

// Product of the dimensions; InvalidArgument on a negative dimension or int64 overflow.
TT_API std::int64_t numel_of(std::span<const std::int64_t> shape);
// Row-major (C-order) strides for `shape`.
TT_API Strides contiguous_strides(std::span<const std::int64_t> shape);
// "[2, 3]" as used in error messages and reprs.
TT_API std::string shape_str(std::span<const std::int64_t> shape);
// True when `prefix` is a leading part of `shape`.
TT_API bool starts_with(std::span<const std::int64_t> shape, std::span<const std::int64_t> prefix);

}  // namespace tensortree
