// The -1 of a requested shape, inferred as view/reshape infer it; shared by Tensor::view and the
// tree methods that reshape batch dimensions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/shape.hpp"

namespace tensortree::detail {

// `requested` with its -1 entry (if any) replaced so that it holds as many elements as `current`;
// InvalidArgument starting with `operation` when no shape fits.
inline Shape infer_shape(const std::string& operation, Shape requested, const Shape& current) {
  const std::int64_t total = numel_of(current);
  const auto mismatch = [&] {
    return InvalidArgument(fmt::format("{}: shape {} ({} elements) cannot become {}", operation, shape_str(current),
                                       total, shape_str(requested)));
  };
  std::int64_t known = 1;
  std::size_t inferred = requested.size();
  for (std::size_t i = 0; i < requested.size(); ++i) {
    if (requested[i] == -1 && inferred == requested.size()) {
      inferred = i;
    } else if (requested[i] == -1) {
      throw InvalidArgument(fmt::format("{}: shape {} has more than one -1", operation, shape_str(requested)));
    } else if (requested[i] < 0) {
      throw InvalidArgument(fmt::format("{}: negative dimension in shape {}", operation, shape_str(requested)));
    } else {
      const std::optional<std::int64_t> product = checked_mul(known, requested[i]);
      if (!product) throw mismatch();
      known = *product;
    }
  }
  if (inferred < requested.size()) {
    if (known == 0 || total % known != 0) throw mismatch();
    requested[inferred] = total / known;
    known = total;
  }
  if (known != total) throw mismatch();
  return requested;
}

}  // namespace tensortree::detail
