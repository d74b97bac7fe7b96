// TensorTree math over whole trees: two-tree apply, allclose, and per-leaf reductions over one
// batch dimension.
#include <span>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/batch_dims.hpp"
#include "tree/path_text.hpp"

namespace tensortree {

TensorTree TensorTree::paired(const TensorTree& other, Path& path, const char* operation,
                              const PairPathFn& fn) const {
  if (other.batch_size_ != batch_size_) {
    throw InvalidArgument(fmt::format("{}: batch_size {} of the other tree at {} differs from {}", operation,
                                      shape_str(other.batch_size_), detail::quoted(path), shape_str(batch_size_)));
  }
  const TensorTree* const both[2] = {this, &other};
  check_same_keys(std::span<const TensorTree* const>(both, 2), path, operation);
  TensorTree out(batch_size_);
  for (const Entry& entry : entries_) {
    const Entry* match = other.find(entry.key);
    path.push_back(entry.key);
    if (entry.node) {
      out.append(entry.key, entry.node->paired(*match->node, path, operation, fn));
    } else {
      Tensor result = fn(path, entry.leaf, match->leaf);
      if (!result.defined() || !starts_with(result.shape(), batch_size_)) {
        throw InvalidArgument(fmt::format("{}: the result for leaf '{}' has shape {}, which does not start with "
                                          "batch_size {}", operation, path_str(path),
                                          result.defined() ? shape_str(result.shape()) : std::string("(undefined)"),
                                          shape_str(batch_size_)));
      }
      out.append(entry.key, std::move(result));
    }
    path.pop_back();
  }
  return out;
}

TensorTree TensorTree::apply(const PairLeafFn& fn, const TensorTree& other) const {
  Path path = location();
  return paired(other, path, "apply",
                [&fn](const Path&, const Tensor& mine, const Tensor& theirs) { return fn(mine, theirs); });
}

bool TensorTree::allclose(const TensorTree& other, double rtol, double atol) const {
  Path path = location();
  bool all = true;
  paired(other, path, "allclose", [&](const Path&, const Tensor& mine, const Tensor& theirs) {
    if (all && !mine.allclose(theirs, rtol, atol)) all = false;
    return mine;
  });
  return all;
}

TensorTree TensorTree::reduced(const char* operation, std::int64_t dim,
                               Tensor (Tensor::*leaf_fn)(std::int64_t, bool) const) const {
  const std::int64_t d = detail::wrap_batch_dim(operation, dim, batch_dims(), batch_size_);
  return transformed([=](const Path&, const Tensor& leaf) { return (leaf.*leaf_fn)(d, false); },
                     [=](const Shape& batch) {
                       Shape shape = batch;
                       shape.erase(shape.begin() + d);
                       return shape;
                     });
}

TensorTree TensorTree::sum(std::int64_t dim) const { return reduced("sum", dim, &Tensor::sum); }
TensorTree TensorTree::mean(std::int64_t dim) const { return reduced("mean", dim, &Tensor::mean); }
TensorTree TensorTree::min(std::int64_t dim) const { return reduced("min", dim, &Tensor::amin); }
TensorTree TensorTree::max(std::int64_t dim) const { return reduced("max", dim, &Tensor::amax); }

}  // namespace tensortree
