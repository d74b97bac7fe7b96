// Element-wise arithmetic on trees: Tensor's operations (tensor_arith.cpp) leaf by leaf, pairing
// the leaves of two trees by key as apply(fn, other) does.
#include <optional>
#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/path_text.hpp"

namespace tensortree {

namespace {

// fn(), with a Tensor error's message extended by the operation and the leaf it happened at.
template <class Fn>
Tensor at_leaf(const char* operation, const Path& path, const Fn& fn) {
  try {
    return fn();
  } catch (const NotSupported& e) {
    throw NotSupported(fmt::format("{} at leaf {}: {}", operation, detail::quoted(path), e.what()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{} at leaf {}: {}", operation, detail::quoted(path), e.what()));
  }
}

}  // namespace

TensorTree TensorTree::leafwise(const char* operation, const std::function<Tensor(const Tensor&)>& fn) const {
  return transformed([&](const Path& path, const Tensor& leaf) { return at_leaf(operation, path, [&] { return fn(leaf); }); },
                     [](const Shape& batch) { return batch; });
}

TensorTree TensorTree::leafwise(const char* operation, const TensorTree& other, const PairLeafFn& fn) const {
  Path path = location();
  return paired(other, path, operation, [&](const Path& at, const Tensor& mine, const Tensor& theirs) {
    return at_leaf(operation, at, [&] { return fn(mine, theirs); });
  });
}

#define TT_TREE_BINARY(NAME)                                                                                   \
  TensorTree TensorTree::NAME(const TensorTree& other) const {                                                 \
    return leafwise(#NAME, other, [](const Tensor& a, const Tensor& b) { return a.NAME(b); });                 \
  }                                                                                                            \
  TensorTree TensorTree::NAME(Scalar other) const {                                                            \
    return leafwise(#NAME, [other](const Tensor& a) { return a.NAME(other); });                                \
  }
#define TT_TREE_INPLACE(NAME)                                                                                  \
  const TensorTree& TensorTree::NAME(const TensorTree& other) const {                                          \
    leafwise(#NAME, other, [](const Tensor& a, const Tensor& b) { return a.NAME(b); });                        \
    return *this;                                                                                              \
  }                                                                                                            \
  const TensorTree& TensorTree::NAME(Scalar other) const {                                                     \
    leafwise(#NAME, [other](const Tensor& a) { return a.NAME(other); });                                       \
    return *this;                                                                                              \
  }
#define TT_TREE_UNARY(NAME) \
  TensorTree TensorTree::NAME() const { return leafwise(#NAME, [](const Tensor& a) { return a.NAME(); }); }

TT_TREE_BINARY(add)
TT_TREE_BINARY(sub)
TT_TREE_BINARY(mul)
TT_TREE_BINARY(div)
TT_TREE_BINARY(eq)
TT_TREE_BINARY(ne)
TT_TREE_BINARY(lt)
TT_TREE_BINARY(le)
TT_TREE_BINARY(gt)
TT_TREE_BINARY(ge)
TT_TREE_INPLACE(add_)
TT_TREE_INPLACE(sub_)
TT_TREE_INPLACE(mul_)
TT_TREE_INPLACE(div_)
TT_TREE_UNARY(neg)
TT_TREE_UNARY(abs)
TT_TREE_UNARY(sqrt)
TT_TREE_UNARY(exp)
TT_TREE_UNARY(log)
#undef TT_TREE_BINARY
#undef TT_TREE_INPLACE
#undef TT_TREE_UNARY

TensorTree TensorTree::clamp(std::optional<double> min, std::optional<double> max) const {
  return leafwise("clamp", [&](const Tensor& a) { return a.clamp(min, max); });
}

TensorTree TensorTree::to(DType dtype) const {
  return leafwise("to", [dtype](const Tensor& a) { return a.to(dtype); });
}

TensorTree operator+(const TensorTree& a, const TensorTree& b) { return a.add(b); }
TensorTree operator+(const TensorTree& a, Scalar b) { return a.add(b); }
TensorTree operator+(Scalar a, const TensorTree& b) { return b.add(a); }
TensorTree operator-(const TensorTree& a, const TensorTree& b) { return a.sub(b); }
TensorTree operator-(const TensorTree& a, Scalar b) { return a.sub(b); }
TensorTree operator-(Scalar a, const TensorTree& b) {
  return b.apply([a](const Tensor& leaf) { return a - leaf; });
}
TensorTree operator*(const TensorTree& a, const TensorTree& b) { return a.mul(b); }
TensorTree operator*(const TensorTree& a, Scalar b) { return a.mul(b); }
TensorTree operator*(Scalar a, const TensorTree& b) { return b.mul(a); }
TensorTree operator/(const TensorTree& a, const TensorTree& b) { return a.div(b); }
TensorTree operator/(const TensorTree& a, Scalar b) { return a.div(b); }
TensorTree operator/(Scalar a, const TensorTree& b) {
  return b.apply([a](const Tensor& leaf) { return a / leaf; });
}
TensorTree operator-(const TensorTree& a) { return a.neg(); }
const TensorTree& operator+=(const TensorTree& a, const TensorTree& b) { return a.add_(b); }
const TensorTree& operator+=(const TensorTree& a, Scalar b) { return a.add_(b); }
const TensorTree& operator-=(const TensorTree& a, const TensorTree& b) { return a.sub_(b); }
const TensorTree& operator-=(const TensorTree& a, Scalar b) { return a.sub_(b); }
const TensorTree& operator*=(const TensorTree& a, const TensorTree& b) { return a.mul_(b); }
const TensorTree& operator*=(const TensorTree& a, Scalar b) { return a.mul_(b); }
const TensorTree& operator/=(const TensorTree& a, const TensorTree& b) { return a.div_(b); }
const TensorTree& operator/=(const TensorTree& a, Scalar b) { return a.div_(b); }

}  // namespace tensortree
