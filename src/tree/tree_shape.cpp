// TensorTree methods that reshape the batch: unbind, split, chunk, reshape/view, squeeze,
// unsqueeze, permute, expand. Each rewrites the batch prefix of every node and leaf (see
// batch_dims.hpp) and keeps views wherever the leaves allow.
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/batch_dims.hpp"

namespace tensortree {

namespace {

// Runs a leaf operation, naming the leaf in any InvalidArgument it raises.
template <class Fn>
Tensor on_leaf(const char* operation, const Path& path, Fn&& fn) {
  try {
    return fn();
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(fmt::format("{} of leaf '{}': {}", operation, path_str(path), error.what()));
  }
}

}  // namespace

std::vector<TensorTree> TensorTree::unbind(std::int64_t dim) const {
  const std::int64_t d = detail::wrap_batch_dim("unbind", dim, batch_dims(), batch_size_);
  std::vector<TensorTree> out;
  const std::int64_t n = batch_size_[static_cast<std::size_t>(d)];
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    out.push_back(transformed([=](const Path&, const Tensor& leaf) { return leaf.select(d, i); },
                              [=](const Shape& batch) {
                                Shape shape = batch;
                                shape.erase(shape.begin() + d);
                                return shape;
                              }));
  }
  return out;
}

std::vector<TensorTree> TensorTree::split(const std::vector<std::int64_t>& sizes, std::int64_t dim) const {
  const std::int64_t d = detail::wrap_batch_dim("split", dim, batch_dims(), batch_size_);
  const std::int64_t total = batch_size_[static_cast<std::size_t>(d)];
  std::int64_t sum = 0;
  for (const std::int64_t size : sizes) {
    if (size < 0) throw InvalidArgument(fmt::format("split: negative size {}", size));
    sum += size;
    if (sum > total) break;
  }
  if (sum != total) {
    throw InvalidArgument(fmt::format("split: sizes [{}] do not sum to {}, the size of batch dimension {} of "
                                      "batch_size {}", fmt::join(sizes, ", "), total, dim, shape_str(batch_size_)));
  }
  std::vector<TensorTree> out;
  out.reserve(sizes.size());
  std::int64_t start = 0;
  for (const std::int64_t size : sizes) {
    out.push_back(transformed([=](const Path&, const Tensor& leaf) { return leaf.narrow(d, start, size); },
                              [=](const Shape& batch) {
                                Shape shape = batch;
                                shape[static_cast<std::size_t>(d)] = size;
                                return shape;
                              }));
    start += size;
  }
  return out;
}

std::vector<TensorTree> TensorTree::split(std::int64_t size, std::int64_t dim) const {
  const std::int64_t d = detail::wrap_batch_dim("split", dim, batch_dims(), batch_size_);
  return split(detail::split_lengths("split", batch_size_[static_cast<std::size_t>(d)], size), d);
}

std::vector<TensorTree> TensorTree::chunk(std::int64_t n, std::int64_t dim) const {
  const std::int64_t d = detail::wrap_batch_dim("chunk", dim, batch_dims(), batch_size_);
  if (n <= 0) throw InvalidArgument(fmt::format("chunk: the number of chunks must be positive, got {}", n));
  const std::int64_t total = batch_size_[static_cast<std::size_t>(d)];
  const std::int64_t size = total == 0 ? 1 : (total + n - 1) / n;
  return split(detail::split_lengths("chunk", total, size), d);
}

TensorTree TensorTree::reshaped(Shape batch_size, bool copy_allowed) const {
  const char* operation = copy_allowed ? "reshape" : "view";
  const Shape target = detail::infer_batch_shape(operation, std::move(batch_size), batch_size_);
  const std::size_t old_len = batch_size_.size();
  return transformed(
      [&](const Path& path, const Tensor& leaf) {
        return on_leaf(operation, path, [&] {
          Shape shape = detail::replace_prefix(leaf.shape(), old_len, target);
          return copy_allowed ? leaf.reshape(std::move(shape)) : leaf.view(std::move(shape));
        });
      },
      [&](const Shape& batch) { return detail::replace_prefix(batch, old_len, target); });
}

TensorTree TensorTree::reshape(Shape batch_size) const { return reshaped(std::move(batch_size), true); }

TensorTree TensorTree::view(Shape batch_size) const { return reshaped(std::move(batch_size), false); }

TensorTree TensorTree::squeeze(std::int64_t dim) const {
  const std::int64_t d = detail::wrap_batch_dim("squeeze", dim, batch_dims(), batch_size_);
  if (batch_size_[static_cast<std::size_t>(d)] != 1) return *this;
  return transformed([=](const Path&, const Tensor& leaf) { return leaf.squeeze(d); },
                     [=](const Shape& batch) {
                       Shape shape = batch;
                       shape.erase(shape.begin() + d);
                       return shape;
                     });
}

TensorTree TensorTree::squeeze() const {
  TensorTree out = *this;
  // From the last batch dimension down, so that the indices of those still to go stay valid.
  for (std::int64_t d = batch_dims() - 1; d >= 0; --d) {
    if (batch_size_[static_cast<std::size_t>(d)] == 1) out = out.squeeze(d);
  }
  return out;
}

TensorTree TensorTree::unsqueeze(std::int64_t dim) const {
  const std::int64_t d = detail::wrap_batch_dim("unsqueeze", dim, batch_dims() + 1, batch_size_);
  return transformed([=](const Path&, const Tensor& leaf) { return leaf.unsqueeze(d); },
                     [=](const Shape& batch) {
                       Shape shape = batch;
                       shape.insert(shape.begin() + d, 1);
                       return shape;
                     });
}

TensorTree TensorTree::permute(std::span<const std::int64_t> dims) const {
  const std::vector<std::int64_t> batch_perm = detail::leaf_permutation(dims, batch_dims(), batch_dims(), batch_size_);
  const std::int64_t b = batch_dims();
  return transformed(
      [&](const Path&, const Tensor& leaf) {
        return leaf.permute(detail::leaf_permutation(batch_perm, b, leaf.dim(), batch_size_));
      },
      [&](const Shape& batch) {
        Shape shape = batch;
        for (std::size_t i = 0; i < batch_perm.size(); ++i) shape[i] = batch[static_cast<std::size_t>(batch_perm[i])];
        return shape;
      });
}

TensorTree TensorTree::permute(std::initializer_list<std::int64_t> dims) const {
  return permute(std::span<const std::int64_t>(dims.begin(), dims.size()));
}

TensorTree TensorTree::expand(Shape batch_size) const {
  const std::size_t old_len = batch_size_.size();
  const auto fail = [&] {
    return InvalidArgument(fmt::format("expand: batch_size {} cannot expand to {}", shape_str(batch_size_),
                                       shape_str(batch_size)));
  };
  if (batch_size.size() < old_len) throw fail();
  const std::size_t lead = batch_size.size() - old_len;
  for (std::size_t d = 0; d < batch_size.size(); ++d) {
    if (d < lead) {
      if (batch_size[d] < 0) throw fail();
      continue;
    }
    const std::int64_t have = batch_size_[d - lead];
    if (batch_size[d] == -1) batch_size[d] = have;
    if (batch_size[d] != have && (have != 1 || batch_size[d] < 0)) throw fail();
  }
  const Shape target = std::move(batch_size);
  return transformed(
      [&](const Path&, const Tensor& leaf) { return leaf.expand(detail::replace_prefix(leaf.shape(), old_len, target)); },
      [&](const Shape& batch) { return detail::replace_prefix(batch, old_len, target); });
}

}  // namespace tensortree
