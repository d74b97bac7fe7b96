// Operators for TensorTree: printing (values_str()), and the element-wise methods (add, sub, mul,
// div, neg and their in-place forms), as TensorDict's td + other, td * 2, -td, td += other.
#pragma once

#include <ostream>

#include "tensortree/export.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

TT_API std::ostream& operator<<(std::ostream& os, const TensorTree& tree);

// A scalar may stand on either side.
TT_API TensorTree operator+(const TensorTree& a, const TensorTree& b);
TT_API TensorTree operator+(const TensorTree& a, Scalar b);
TT_API TensorTree operator+(Scalar a, const TensorTree& b);
TT_API TensorTree operator-(const TensorTree& a, const TensorTree& b);
TT_API TensorTree operator-(const TensorTree& a, Scalar b);
TT_API TensorTree operator-(Scalar a, const TensorTree& b);
TT_API TensorTree operator*(const TensorTree& a, const TensorTree& b);
TT_API TensorTree operator*(const TensorTree& a, Scalar b);
TT_API TensorTree operator*(Scalar a, const TensorTree& b);
TT_API TensorTree operator/(const TensorTree& a, const TensorTree& b);
TT_API TensorTree operator/(const TensorTree& a, Scalar b);
TT_API TensorTree operator/(Scalar a, const TensorTree& b);
TT_API TensorTree operator-(const TensorTree& a);
TT_API const TensorTree& operator+=(const TensorTree& a, const TensorTree& b);
TT_API const TensorTree& operator+=(const TensorTree& a, Scalar b);
TT_API const TensorTree& operator-=(const TensorTree& a, const TensorTree& b);
TT_API const TensorTree& operator-=(const TensorTree& a, Scalar b);
TT_API const TensorTree& operator*=(const TensorTree& a, const TensorTree& b);
TT_API const TensorTree& operator*=(const TensorTree& a, Scalar b);
TT_API const TensorTree& operator/=(const TensorTree& a, const TensorTree& b);
TT_API const TensorTree& operator/=(const TensorTree& a, Scalar b);

}  // namespace tensortree
