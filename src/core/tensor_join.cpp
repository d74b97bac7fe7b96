// Operations that build a new tensor out of rows of others: index_select, stack, cat.
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

namespace {

std::int64_t product(const Shape& shape, std::size_t begin, std::size_t end) {
  std::int64_t n = 1;
  for (std::size_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

// The entries of a 1-D int32/int64 CPU index tensor, negatives wrapped, each checked against `size`.
std::vector<std::int64_t> checked_rows(const Tensor& index, std::int64_t dim, std::int64_t size) {
  if (!index.defined()) throw InvalidArgument("index_select: the index tensor is undefined");
  if (index.dim() != 1 || !index.device().is_cpu() ||
      (index.dtype() != DType::Int64 && index.dtype() != DType::Int32)) {
    throw InvalidArgument(fmt::format("index_select: the index must be a 1-D int64 or int32 CPU tensor, got {}{} on {}",
                                      index.dtype(), shape_str(index.shape()), index.device()));
  }
  std::vector<std::int64_t> rows;
  rows.reserve(static_cast<std::size_t>(index.numel()));
  for (std::int64_t i = 0; i < index.numel(); ++i) {
    const std::int64_t requested =
        index.dtype() == DType::Int64 ? index.at<std::int64_t>({i}) : index.at<std::int32_t>({i});
    const std::int64_t row = requested < 0 ? requested + size : requested;
    if (row < 0 || row >= size) {
      throw InvalidArgument(fmt::format("index_select: index[{}] = {} is out of range for dimension {} of size {}", i,
                                        requested, dim, size));
    }
    rows.push_back(row);
  }
  return rows;
}

// Copies row rows[i] of the contiguous `src` into row i of the contiguous `dst`, along `dim`:
// seen as [outer, rows, inner], every selected row is one memcpy.
void gather_contiguous_rows(const Tensor& src, const Tensor& dst, std::size_t dim,
                            const std::vector<std::int64_t>& rows) {
  const Shape& shape = src.shape();
  const std::int64_t outer = product(shape, 0, dim);
  const auto row_bytes = static_cast<std::size_t>(product(shape, dim + 1, shape.size())) * src.itemsize();
  const auto in_rows = static_cast<std::size_t>(shape[dim]);
  const std::size_t out_rows = rows.size();
  const auto* from = static_cast<const std::byte*>(src.data_ptr());
  auto* to = static_cast<std::byte*>(dst.data_ptr());
  for (std::size_t o = 0; o < static_cast<std::size_t>(outer); ++o) {
    for (std::size_t i = 0; i < out_rows; ++i) {
      const auto row = static_cast<std::size_t>(rows[i]);
      std::memcpy(to + (o * out_rows + i) * row_bytes, from + (o * in_rows + row) * row_bytes, row_bytes);
    }
  }
}

std::string describe(const Tensor& tensor) {
  return fmt::format("{}{} on {}", tensor.dtype(), shape_str(tensor.shape()), tensor.device());
}

[[noreturn]] void reject(const char* op, std::size_t i, const Tensor& tensor, const Tensor& first,
                         const std::string& rule) {
  throw InvalidArgument(fmt::format("{}: tensor {} is {} but tensor 0 is {}; {}", op, i, describe(tensor),
                                    describe(first), rule));
}

// At least one tensor, all defined, one dtype, one device.
void check_joinable(const char* op, std::span<const Tensor> tensors) {
  if (tensors.empty()) throw InvalidArgument(fmt::format("{} needs at least one tensor", op));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) {
      throw InvalidArgument(fmt::format("{}: tensor {} is undefined", op, i));
    }
  }
  const Tensor& first = tensors[0];
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != first.dtype()) reject(op, i, tensors[i], first, "dtypes must match");
    if (tensors[i].device() != first.device()) reject(op, i, tensors[i], first, "devices must match");
  }
}

bool same_except(const Shape& a, const Shape& b, std::size_t dim) {
  if (a.size() != b.size()) return false;
  for (std::size_t d = 0; d < a.size(); ++d) {
    if (d != dim && a[d] != b[d]) return false;
  }
  return true;
}

// The shape of tensors[0] with dimension `dim` summed over all tensors.
Shape joined_shape(std::span<const Tensor> tensors, std::size_t dim) {
  const Tensor& first = tensors[0];
  Shape shape = first.shape();
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (!same_except(tensors[i].shape(), first.shape(), dim)) {
      reject("cat", i, tensors[i], first, fmt::format("shapes may differ only in dimension {}", dim));
    }
    const std::optional<std::int64_t> joined = detail::checked_add(shape[dim], tensors[i].shape()[dim]);
    if (!joined) throw InvalidArgument(fmt::format("cat: the joined dimension {} overflows int64", dim));
    shape[dim] = *joined;
  }
  return shape;
}

}  // namespace

Tensor Tensor::index_select(std::int64_t dim, const Tensor& index) const {
  check_defined("index_select");
  const std::int64_t d = wrap_dim(dim);
  const std::vector<std::int64_t> rows = checked_rows(index, d, shape_[d]);
  Shape out_shape = shape_;
  out_shape[d] = static_cast<std::int64_t>(rows.size());
  Tensor out = empty(std::move(out_shape), {dtype_, device(), false});
  if (out.numel() == 0) return out;
  if (device().is_cpu() && is_contiguous()) {
    gather_contiguous_rows(*this, out, static_cast<std::size_t>(d), rows);
    return out;
  }
  // Strided and CUDA inputs: one copy_ per row, through the existing copy paths.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out.select(d, static_cast<std::int64_t>(i)).copy_(select(d, rows[i]));
  }
  return out;
}

Tensor Tensor::stack(std::span<const Tensor> tensors, std::int64_t dim) {
  check_joinable("stack", tensors);
  const Tensor& first = tensors[0];
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].shape() != first.shape()) {
      reject("stack", i, tensors[i], first, "stacked tensors need one shape");
    }
  }
  std::vector<Tensor> unsqueezed;
  unsqueezed.reserve(tensors.size());
  for (const Tensor& tensor : tensors) unsqueezed.push_back(tensor.unsqueeze(dim));
  return cat(unsqueezed, dim);  // a negative dim counts from the end of the unsqueezed rank too
}

Tensor Tensor::cat(std::span<const Tensor> tensors, std::int64_t dim) {
  check_joinable("cat", tensors);
  const Tensor& first = tensors[0];
  if (first.dim() == 0) {
    throw InvalidArgument("cat: tensor 0 is zero-dimensional and has no dimension to join");
  }
  const std::int64_t d = first.wrap_dim(dim);
  Tensor out = empty(joined_shape(tensors, static_cast<std::size_t>(d)),
                     {first.dtype(), first.device(), false});
  // Each part lands in a narrowed view of the output: one memcpy per contiguous run.
  std::int64_t offset = 0;
  for (const Tensor& tensor : tensors) {
    const std::int64_t length = tensor.shape()[static_cast<std::size_t>(d)];
    out.narrow(d, offset, length).copy_(tensor);
    offset += length;
  }
  return out;
}

Tensor Tensor::stack(std::initializer_list<Tensor> tensors, std::int64_t dim) {
  return stack(std::span<const Tensor>(tensors.begin(), tensors.size()), dim);
}

Tensor Tensor::cat(std::initializer_list<Tensor> tensors, std::int64_t dim) {
  return cat(std::span<const Tensor>(tensors.begin(), tensors.size()), dim);
}

}  // namespace tensortree
