// TensorTree operations that build new trees leaf by leaf: batch indexing, apply/to/clone; plus
// equal(). Stack/cat are in tree_join.cpp, key selection and flattening in tree_keys.cpp.
#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/batch_dims.hpp"
#include "tree/path_text.hpp"

namespace tensortree {

namespace {

using detail::quoted;

// The length of Python's range(n)[start:stop:step] for a positive step.
std::int64_t sliced_length(std::int64_t n, std::int64_t start, std::int64_t stop, std::int64_t step) {
  auto clamp = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
  const std::int64_t begin = clamp(start);
  const std::int64_t end = std::max(clamp(stop), begin);
  return (end - begin + step - 1) / step;
}

void check_row_index(const Tensor& rows, const Shape& batch_size) {
  if (batch_size.empty()) throw InvalidArgument("index by rows of a tree with batch_size []");
  if (!rows.defined() || rows.dim() != 1 || !rows.device().is_cpu() ||
      (rows.dtype() != DType::Int64 && rows.dtype() != DType::Int32)) {
    const std::string got = rows.defined()
                                ? fmt::format("{}{} on {}", rows.dtype(), shape_str(rows.shape()), rows.device())
                                : std::string("an undefined tensor");
    throw InvalidArgument(fmt::format("index by rows needs a 1-D int64 or int32 CPU tensor, got {}", got));
  }
  const std::int64_t n = batch_size[0];
  for (std::int64_t i = 0; i < rows.numel(); ++i) {
    const std::int64_t row =
        rows.dtype() == DType::Int64 ? rows.at<std::int64_t>({i}) : rows.at<std::int32_t>({i});
    if (row < -n || row >= n) {
      throw InvalidArgument(fmt::format("index by rows: rows[{}] = {} is out of range for batch_size {}", i, row,
                                        shape_str(batch_size)));
    }
  }
}

std::int64_t wrapped_dim(const char* operation, std::int64_t dim, std::int64_t count,
                         const Shape& batch_size) {
  return detail::wrap_batch_dim(operation, dim, count, batch_size);
}

}  // namespace

// ---- structure-preserving transforms ------------------------------------------------------------

TensorTree TensorTree::transformed(const PathLeafFn& leaf_fn, const BatchFn& batch_fn) const {
  Path path = location();  // so that messages name full paths
  return transformed(path, leaf_fn, batch_fn);
}

TensorTree TensorTree::transformed(Path& path, const PathLeafFn& leaf_fn, const BatchFn& batch_fn) const {
  TensorTree out(batch_fn(batch_size_));
  out.entries_.reserve(entries_.size());
  for (const Entry& entry : entries_) {
    path.push_back(entry.key);
    if (entry.node) {
      out.append(entry.key, entry.node->transformed(path, leaf_fn, batch_fn));
    } else {
      Tensor result = leaf_fn(path, entry.leaf);
      if (!result.defined() || !starts_with(result.shape(), out.batch_size_)) {
        throw InvalidArgument(fmt::format(
            "the result for leaf {} has shape {}, which does not start with batch_size {}", quoted(path),
            result.defined() ? shape_str(result.shape()) : std::string("(undefined)"), shape_str(out.batch_size_)));
      }
      out.append(entry.key, std::move(result));
    }
    path.pop_back();
  }
  return out;
}

TensorTree TensorTree::index(std::int64_t i) const {
  if (batch_size_.empty())
    throw InvalidArgument(fmt::format("index({}) of a tree with batch_size []", i));
  const std::int64_t n = batch_size_[0];
  const std::int64_t row = i < 0 ? i + n : i;
  if (row < 0 || row >= n) {
    throw InvalidArgument(fmt::format("index {} is out of range for batch_size {}", i, shape_str(batch_size_)));
  }
  return transformed([row](const Path&, const Tensor& leaf) { return leaf.select(0, row); },
                     [](const Shape& batch) { return Shape(batch.begin() + 1, batch.end()); });
}

TensorTree TensorTree::slice(std::int64_t dim, const Slice& range) const {
  const std::int64_t start = range.start;
  const std::int64_t stop = range.stop.value_or(std::numeric_limits<std::int64_t>::max());  // none: to the end
  const std::int64_t step = range.step;
  const std::int64_t d = wrapped_dim("slice", dim, batch_dims(), batch_size_);
  if (step <= 0) throw InvalidArgument(fmt::format("slice step must be positive, got {}", step));
  const std::int64_t length = sliced_length(batch_size_[static_cast<std::size_t>(d)], start, stop, step);
  return transformed([=](const Path&, const Tensor& leaf) { return leaf.slice(d, range); },
                     [=](const Shape& batch) {
                       Shape out = batch;
                       out[static_cast<std::size_t>(d)] = length;
                       return out;
                     });
}

TensorTree TensorTree::index(const Tensor& rows) const {
  if (rows.defined() && rows.dtype() == DType::Bool) return masked_select(rows);  // td[mask]
  check_row_index(rows, batch_size_);
  const std::int64_t count = rows.numel();
  return transformed([&rows](const Path&, const Tensor& leaf) { return leaf.index_select(0, rows); },
                     [count](const Shape& batch) {
                       Shape out = batch;
                       out[0] = count;
                       return out;
                     });
}

TensorTree TensorTree::apply(const LeafFn& fn) const {
  return transformed([&fn](const Path&, const Tensor& leaf) { return fn(leaf); },
                     [](const Shape& batch) { return batch; });
}

void TensorTree::apply_(const LeafFn& fn) const {
  for_each_leaf([&](const Path& path, const Tensor& leaf) {
    const Tensor result = fn(leaf);
    if (!result.defined() || result.shape() != leaf.shape() || result.dtype() != leaf.dtype()) {
      const std::string got =
          result.defined() ? fmt::format("{}{}", result.dtype(), shape_str(result.shape())) : std::string("undefined");
      throw InvalidArgument(fmt::format("apply_: the result for leaf {} is {}, expected {}{}", describe(path), got,
                                        leaf.dtype(), shape_str(leaf.shape())));
    }
    leaf.copy_(result);
  });
}

TensorTree TensorTree::to(Device device) const {
  return apply([device](const Tensor& leaf) { return leaf.to(device); });
}

TensorTree TensorTree::clone() const {
  return apply([](const Tensor& leaf) { return leaf.clone(); });
}

bool TensorTree::equal(const TensorTree& other) const {
  if (batch_size_ != other.batch_size_ || entries_.size() != other.entries_.size()) return false;
  for (const Entry& entry : entries_) {
    const Entry* match = other.find(entry.key);
    if (!match || !match->node != !entry.node) return false;
    const bool same = entry.node ? entry.node->equal(*match->node) : entry.leaf.equal(match->leaf);
    if (!same) return false;
  }
  return true;
}

}  // namespace tensortree
