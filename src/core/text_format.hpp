// How the library's own types print inside {fmt} format strings, so that an error message is one
// fmt::format call: fmt::format("{} of {} on {}", shape, dtype, device).
#pragma once

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/shape.hpp"

template <>
struct fmt::formatter<tensortree::Device> : fmt::ostream_formatter {};
template <>
struct fmt::formatter<tensortree::ReduceOp> : fmt::ostream_formatter {};

template <>
struct fmt::formatter<tensortree::DType> : fmt::formatter<std::string_view> {
  auto format(tensortree::DType dtype, fmt::format_context& context) const {
    return fmt::formatter<std::string_view>::format(tensortree::dtype_name(dtype), context);
  }
};

// Shapes print as shape_str does ("[2, 3]"), not as fmt's range formatter would.
template <>
struct fmt::formatter<tensortree::DimVector> : fmt::formatter<std::string_view> {
  auto format(const tensortree::DimVector& dims, fmt::format_context& context) const {
    return fmt::formatter<std::string_view>::format(tensortree::shape_str(dims), context);
  }
};
template <>
struct fmt::is_range<tensortree::DimVector, char> : std::false_type {};
