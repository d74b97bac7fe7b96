#include "tree/batch_dims.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/shape_infer.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

std::int64_t wrap_batch_dim(const char* operation, std::int64_t dim, std::int64_t count, const Shape& batch_size) {
  const std::int64_t wrapped = dim < 0 ? dim + count : dim;
  if (wrapped < 0 || wrapped >= count) {
    const std::string expected =
        count == 0 ? std::string("there is no batch dimension") : fmt::format("expected {}..{}", -count, count - 1);
    throw InvalidArgument(fmt::format("{}: dim {} is out of range for batch_size {} ({})", operation, dim,
                                      shape_str(batch_size), expected));
  }
  return wrapped;
}

Shape replace_prefix(const Shape& shape, std::size_t prefix_len, const Shape& prefix) {
  Shape out = prefix;
  out.insert(out.end(), shape.begin() + static_cast<std::ptrdiff_t>(prefix_len), shape.end());
  return out;
}

Shape infer_batch_shape(const char* operation, Shape requested, const Shape& batch_size) {
  return infer_shape(fmt::format("{} of the batch", operation), std::move(requested), batch_size);
}

std::vector<std::int64_t> leaf_permutation(std::span<const std::int64_t> batch_perm, std::int64_t batch_dims,
                                           std::int64_t ndim, const Shape& batch_size) {
  if (static_cast<std::int64_t>(batch_perm.size()) != batch_dims) {
    throw InvalidArgument(fmt::format("permute: {} dims given for batch_size {}", batch_perm.size(),
                                      shape_str(batch_size)));
  }
  std::vector<std::int64_t> out;
  std::vector<bool> seen(static_cast<std::size_t>(batch_dims), false);
  for (const std::int64_t requested : batch_perm) {
    const std::int64_t d = wrap_batch_dim("permute", requested, batch_dims, batch_size);
    if (seen[static_cast<std::size_t>(d)]) {
      throw InvalidArgument(fmt::format("permute repeats batch dimension {} of batch_size {}", requested,
                                        shape_str(batch_size)));
    }
    seen[static_cast<std::size_t>(d)] = true;
    out.push_back(d);
  }
  for (std::int64_t d = batch_dims; d < ndim; ++d) out.push_back(d);
  return out;
}

void check_batch_mask(const char* operation, const Tensor& mask, const Shape& batch_size) {
  if (!mask.defined() || mask.dtype() != DType::Bool) {
    throw InvalidArgument(fmt::format("{}: the mask must be a bool tensor, not {}", operation,
                                      mask.defined() ? dtype_name(mask.dtype()) : std::string_view("undefined")));
  }
  const Shape& shape = mask.shape();
  if (shape.empty() || shape.size() > batch_size.size() || !starts_with(batch_size, shape)) {
    throw InvalidArgument(fmt::format("{}: a mask of shape {} does not match the leading dimensions of batch_size {}",
                                      operation, shape_str(shape), shape_str(batch_size)));
  }
}

Tensor mask_for_leaf(const Tensor& mask, std::int64_t ndim) {
  Shape shape = mask.shape();
  shape.resize(static_cast<std::size_t>(ndim), 1);
  return mask.reshape(std::move(shape));
}

std::vector<std::int64_t> split_lengths(const char* operation, std::int64_t total, std::int64_t size) {
  if (size <= 0) {
    throw InvalidArgument(fmt::format("{}: pieces of {} rows (must be positive)", operation, size));
  }
  std::vector<std::int64_t> out;
  for (std::int64_t start = 0; start < total; start += size) out.push_back(std::min(size, total - start));
  if (out.empty()) out.push_back(0);  // torch.split of an empty dimension gives one empty piece
  return out;
}

}  // namespace tensortree::detail
