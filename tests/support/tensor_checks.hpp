// Element checks shared by the unit tests of tensors and trees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "tensortree/tensor.hpp"

namespace tensortree::test {

// The value of element i (C order) of a tensor a test makes or expects.
using ValueAt = std::function<double(std::int64_t)>;

// A CPU tensor whose element i (C order) holds value(i), as the dtype stores it.
inline Tensor make_tensor(Shape shape, DType dtype, const ValueAt& value) {
  Tensor out = Tensor::empty(std::move(shape), {dtype});
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      auto* data = out.data<T>();
      for (std::int64_t i = 0; i < out.numel(); ++i) data[i] = static_cast<T>(value(i));
    } else {
      FAIL("make_tensor covers the arithmetic dtypes only");
    }
  });
  return out;
}

// Every element, in C order, equals expected[i].
inline void require_values(const Tensor& tensor, const std::vector<double>& expected) {
  REQUIRE(tensor.numel() == static_cast<std::int64_t>(expected.size()));
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(tensor.value_at_linear(i).real() == expected[static_cast<std::size_t>(i)]);
  }
}

}  // namespace tensortree::test
