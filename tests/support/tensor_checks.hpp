// Element checks shared by the unit tests of tensors and trees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "tensortree/tensor.hpp"

namespace tensortree::test {

// Every element, in C order, equals expected[i].
inline void require_values(const Tensor& tensor, const std::vector<double>& expected) {
  REQUIRE(tensor.numel() == static_cast<std::int64_t>(expected.size()));
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(tensor.value_at_linear(i).real() == expected[static_cast<std::size_t>(i)]);
  }
}

}  // namespace tensortree::test
