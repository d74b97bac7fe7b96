// Tensor views that rearrange dimensions without copying: transpose, permute, view/reshape,
// squeeze/unsqueeze, expand.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/shape_infer.hpp"
#include "core/text_format.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

namespace {

std::string dims_str(std::int64_t dim, std::int64_t ndim) {
  return fmt::format("dimension {} (tensor has {})", dim, ndim);
}

}  // namespace

Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  check_defined("transpose");
  const std::int64_t a = wrap_dim(dim0);
  const std::int64_t b = wrap_dim(dim1);
  Tensor out = *this;
  std::swap(out.shape_[a], out.shape_[b]);
  std::swap(out.strides_[a], out.strides_[b]);
  return out;
}

Tensor Tensor::permute(std::initializer_list<std::int64_t> dims) const {
  return permute(std::span<const std::int64_t>(dims.begin(), dims.size()));
}

Tensor Tensor::permute(std::span<const std::int64_t> dims) const {
  check_defined("permute");
  if (static_cast<std::int64_t>(dims.size()) != dim()) {
    throw InvalidArgument(fmt::format("permute of {} dimensions for a tensor of {}", dims.size(), dim()));
  }
  Tensor out = *this;
  std::vector<bool> seen(shape_.size(), false);
  std::size_t i = 0;
  for (const std::int64_t requested : dims) {
    const std::int64_t d = wrap_dim(requested);
    if (seen[d]) throw InvalidArgument(fmt::format("permute repeats {}", dims_str(requested, dim())));
    seen[d] = true;
    out.shape_[i] = shape_[d];
    out.strides_[i] = strides_[d];
    ++i;
  }
  return out;
}

namespace {

// PyTorch's computeStride: walks the old dimensions from the innermost, grouping those that are
// laid out as one run of memory; each run must be split or merged into new dimensions exactly.
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape) {
  if (old_shape.empty()) return Strides(new_shape.size(), 1);
  Strides out(new_shape.size(), 0);
  if (numel_of(old_shape) == 0) {
    if (old_shape == new_shape) return old_strides;
    return contiguous_strides(new_shape);
  }
  std::int64_t view_d = static_cast<std::int64_t>(new_shape.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (std::int64_t tensor_d = static_cast<std::int64_t>(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    const bool run_ends = tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                                            old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!run_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

std::optional<Tensor> Tensor::try_view(Shape shape) const {
  check_defined("view");
  shape = detail::infer_shape("view", std::move(shape), shape_);
  std::optional<Strides> strides = view_strides(shape_, strides_, shape);
  if (!strides) return std::nullopt;
  Tensor out = *this;
  out.strides_ = std::move(*strides);
  out.shape_ = std::move(shape);
  return out;
}

Tensor Tensor::view(Shape shape) const {
  const Shape requested = shape;
  std::optional<Tensor> out = try_view(std::move(shape));
  if (!out) {
    throw InvalidArgument(fmt::format("view {} of a tensor of shape {} and strides {} needs a copy (its strides do "
                                      "not allow a view); use reshape()", shape_str(requested), shape_str(shape_),
                                      shape_str(strides_)));
  }
  return *std::move(out);
}

Tensor Tensor::byte_view() const {
  check_defined("byte_view");
  if (!is_contiguous()) {
    throw InvalidArgument(fmt::format("byte_view of a tensor of shape {} and strides {}: its bytes are not "
                                      "contiguous; use contiguous() first", shape_str(shape_), shape_str(strides_)));
  }
  return Tensor(storage_, byte_offset_, DType::UInt8, {static_cast<std::int64_t>(nbytes())}, {1});
}

Tensor Tensor::reshape(Shape shape) const {
  std::optional<Tensor> out = try_view(shape);
  return out ? *std::move(out) : clone().view(std::move(shape));
}

Tensor Tensor::squeeze(std::int64_t dim) const {
  check_defined("squeeze");
  const std::int64_t d = wrap_dim(dim);
  if (shape_[d] != 1) return *this;
  Tensor out = *this;
  out.shape_.erase(out.shape_.begin() + d);
  out.strides_.erase(out.strides_.begin() + d);
  return out;
}

Tensor Tensor::squeeze() const {
  check_defined("squeeze");
  Tensor out = *this;
  out.shape_.clear();
  out.strides_.clear();
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] == 1) continue;
    out.shape_.push_back(shape_[d]);
    out.strides_.push_back(strides_[d]);
  }
  return out;
}

Tensor Tensor::expand(Shape shape) const {
  check_defined("expand");
  const auto fail = [&](const std::string& why) {
    return InvalidArgument(fmt::format("expand of a tensor of shape {} to {}: {}", shape_str(shape_), shape_str(shape),
                                       why));
  };
  if (shape.size() < shape_.size()) throw fail("fewer dimensions than the tensor has");
  const std::size_t lead = shape.size() - shape_.size();
  Strides strides(shape.size(), 0);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < lead) {
      if (shape[d] < 0) throw fail(fmt::format("a new leading dimension cannot be {}", shape[d]));
      continue;  // stride 0: every index of a new dimension reads the same elements
    }
    const std::int64_t have = shape_[d - lead];
    if (shape[d] == -1) shape[d] = have;
    if (shape[d] == have) {
      strides[d] = strides_[d - lead];
    } else if (have != 1) {
      throw fail(fmt::format("dimension {} of size {} is neither {} nor 1", d, have, shape[d]));
    } else if (shape[d] < 0) {
      throw fail(fmt::format("negative size {}", shape[d]));
    }
  }
  Tensor out = *this;
  out.shape_ = std::move(shape);
  out.strides_ = std::move(strides);
  numel_of(out.shape_);  // rejects an element count that overflows
  return out;
}

Tensor Tensor::unsqueeze(std::int64_t dim) const {
  check_defined("unsqueeze");
  const std::int64_t n = this->dim();
  const std::int64_t d = dim < 0 ? dim + n + 1 : dim;
  if (d < 0 || d > n) {
    throw InvalidArgument(fmt::format("unsqueeze at dimension {} of a tensor of {} dimensions (valid: {} to {})", dim,
                                      n, -n - 1, n));
  }
  // The stride PyTorch gives the new dimension, so a contiguous tensor keeps contiguous strides.
  const std::int64_t stride = d < n ? strides_[d] * std::max<std::int64_t>(shape_[d], 1) : 1;
  Tensor out = *this;
  out.shape_.insert(out.shape_.begin() + d, 1);
  out.strides_.insert(out.strides_.begin() + d, stride);
  return out;
}

}  // namespace tensortree
