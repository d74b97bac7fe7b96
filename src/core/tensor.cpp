// Tensor: construction, factories, properties, element access and the indexing views (slice,
// narrow, select). Other views are in tensor_view.cpp, copies in tensor_copy.cpp.
#include "tensortree/tensor.hpp"

#include <algorithm>
#include <limits>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "core/checked_math.hpp"
#include "core/element_convert.hpp"
#include "core/text_format.hpp"

namespace tensortree {

namespace {

std::string dims_str(std::int64_t dim, std::int64_t ndim) {
  return fmt::format("dimension {} (tensor has {})", dim, ndim);
}

// Bytes from element 0 to the end of the last element a view can touch, or 0 for an empty view.
// Checked arithmetic: shapes and strides may come from foreign memory or untrusted input.
std::size_t view_extent(const Shape& shape, const Strides& strides, std::size_t itemsize) {
  for (const std::int64_t stride : strides) {
    if (stride < 0) throw InvalidArgument(fmt::format("negative strides are not supported: {}", shape_str(strides)));
  }
  numel_of(shape);  // rejects negative dimensions
  const std::optional<std::size_t> bytes = detail::view_extent_bytes(shape, strides, itemsize);
  if (!bytes) {
    throw InvalidArgument(fmt::format("a view of shape {} with strides {} spans more bytes than memory can hold",
                                      shape_str(shape), shape_str(strides)));
  }
  return *bytes;
}

}  // namespace

Tensor::Tensor(StoragePtr storage, std::size_t byte_offset, DType dtype, Shape shape, Strides strides)
    : storage_(std::move(storage)),
      byte_offset_(byte_offset),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)) {
  if (!storage_) throw InvalidArgument("a tensor needs a storage");
  if (strides_.empty() && !shape_.empty()) strides_ = contiguous_strides(shape_);
  if (strides_.size() != shape_.size()) {
    throw InvalidArgument(fmt::format("shape {} and strides {} differ in length", shape_str(shape_),
                                      shape_str(strides_)));
  }
  numel_of(shape_);  // rejects negative dimensions and overflow
  const std::size_t extent = view_extent(shape_, strides_, itemsize());
  if (extent > 0 && (extent > storage_->nbytes() || byte_offset_ > storage_->nbytes() - extent)) {
    throw InvalidArgument(fmt::format("view of shape {} at byte offset {} needs {} bytes but the storage holds {}",
                                      shape_str(shape_), byte_offset_, extent, storage_->nbytes()));
  }
}

// ---- factories -----------------------------------------------------------------------------

Tensor Tensor::empty(Shape shape, TensorOptions options) {
  numel_of(shape);  // rejects negative dimensions with its own message
  const std::optional<std::uint64_t> nbytes = detail::checked_nbytes(shape, tensortree::itemsize(options.dtype));
  if (!nbytes) {
    throw InvalidArgument(fmt::format("a {} tensor of shape {} needs more bytes than memory can hold", options.dtype,
                                      shape_str(shape)));
  }
  auto storage = Storage::allocate(static_cast<std::size_t>(*nbytes), options.device, options.pinned);
  Strides strides = contiguous_strides(shape);
  return Tensor(std::move(storage), 0, options.dtype, std::move(shape), std::move(strides));
}

Tensor Tensor::zeros(Shape shape, TensorOptions options) {
  Tensor t = empty(std::move(shape), options);
  t.fill_(0.0);
  return t;
}

Tensor Tensor::full(Shape shape, double value, TensorOptions options) {
  Tensor t = empty(std::move(shape), options);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(Shape shape, double start, double step, TensorOptions options) {
  // The result is allocated first so that bad options fail as they do in empty().
  Tensor out = empty(shape, options);
  Tensor host = out.device().is_cpu() ? out : empty(std::move(shape), {options.dtype, Device::cpu(), false});
  visit_dtype(host.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto* values = static_cast<T*>(host.data_ptr());
    for (std::int64_t i = 0; i < host.numel(); ++i) {
      values[i] = detail::element_from_double<T>(start + static_cast<double>(i) * step);
    }
  });
  if (!out.device().is_cpu()) out.copy_(host);
  return out;
}

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, Device device,
                         Storage::Deleter deleter, Strides strides) {
  // Everything that can throw happens before the memory is adopted (see the header).
  if (strides.empty()) strides = contiguous_strides(shape);
  if (strides.size() != shape.size()) {
    throw InvalidArgument(fmt::format("from_blob: shape {} and strides {} differ in length", shape_str(shape),
                                      shape_str(strides)));
  }
  const std::size_t extent = view_extent(shape, strides, tensortree::itemsize(dtype));
  if (data == nullptr && extent > 0) {
    throw InvalidArgument(fmt::format("from_blob: null data for a view of shape {}", shape_str(shape)));
  }
  auto storage = Storage::adopt(data, extent, device, std::move(deleter));
  return Tensor(std::move(storage), 0, dtype, std::move(shape), std::move(strides));
}

// ---- properties ----------------------------------------------------------------------------

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

std::int64_t Tensor::wrap_dim(std::int64_t dim) const {
  const std::int64_t n = this->dim();
  const std::int64_t wrapped = dim < 0 ? dim + n : dim;
  if (wrapped < 0 || wrapped >= n) throw InvalidArgument(fmt::format("no {}", dims_str(dim, n)));
  return wrapped;
}

std::int64_t Tensor::size(std::int64_t dim) const { return shape_[wrap_dim(dim)]; }

std::int64_t Tensor::numel() const { return defined() ? numel_of(shape_) : 0; }

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 0) return true;
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  if (!storage_ || storage_->data() == nullptr) return nullptr;
  return storage_->data() + byte_offset_;
}

void Tensor::check_defined(const char* what) const {
  if (!defined()) throw InvalidArgument(fmt::format("{} on an undefined tensor", what));
}

void Tensor::check_element_type(DType requested) const {
  if (requested != dtype_) {
    throw InvalidArgument(fmt::format("element type {} requested from a tensor of dtype {}", requested, dtype_));
  }
}

std::byte* Tensor::element_address(std::initializer_list<std::int64_t> index) const {
  check_defined("element access");
  if (!device().is_cpu()) throw InvalidArgument(fmt::format("element access needs a CPU tensor, not {}",
                                                            device()));
  if (static_cast<std::int64_t>(index.size()) != dim()) {
    throw InvalidArgument(fmt::format("index of {} coordinates for a tensor of {} dimensions", index.size(), dim()));
  }
  std::int64_t offset = 0;
  std::size_t d = 0;
  for (const std::int64_t i : index) {
    if (i < 0 || i >= shape_[d]) {
      throw InvalidArgument(fmt::format("index {} out of range for dimension {} of size {}", i, d, shape_[d]));
    }
    offset += i * strides_[d++];
  }
  return static_cast<std::byte*>(data_ptr()) + offset * static_cast<std::int64_t>(itemsize());
}

std::complex<double> Tensor::value_at_linear(std::int64_t linear_index) const {
  check_defined("value_at_linear");
  if (!device().is_cpu()) throw InvalidArgument("value_at_linear needs a CPU tensor");
  if (linear_index < 0 || linear_index >= numel()) {
    throw InvalidArgument(fmt::format("linear index {} out of range for {} elements", linear_index, numel()));
  }
  std::int64_t offset = 0;
  for (std::size_t d = shape_.size(); d-- > 0;) {
    offset += (linear_index % shape_[d]) * strides_[d];
    linear_index /= shape_[d];
  }
  const auto* p = static_cast<const std::byte*>(data_ptr()) + offset * static_cast<std::int64_t>(itemsize());
  return detail::load_element(dtype_, p);
}

// ---- views ---------------------------------------------------------------------------------

Tensor Tensor::slice(std::int64_t dim, const Slice& range) const {
  const std::int64_t start = range.start;
  const std::int64_t stop = range.stop.value_or(std::numeric_limits<std::int64_t>::max());  // none: to the end
  const std::int64_t step = range.step;
  check_defined("slice");
  const std::int64_t d = wrap_dim(dim);
  if (step <= 0) throw InvalidArgument(fmt::format("slice step must be positive, got {}", step));
  const std::int64_t n = shape_[d];
  auto clamp = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
  const std::int64_t begin = clamp(start);
  const std::int64_t end = std::max(clamp(stop), begin);
  const std::int64_t count = end == begin ? 0 : (end - begin - 1) / step + 1;
  Tensor out = *this;
  out.shape_[d] = count;
  // With one element or none the stride is never used; keeping it avoids overflow on a huge step.
  if (count > 1) out.strides_[d] = strides_[d] * step;
  if (count > 0) {
    out.byte_offset_ += static_cast<std::size_t>(begin * strides_[d]) * itemsize();
  }
  return out;
}

Tensor Tensor::narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
  check_defined("narrow");
  const std::int64_t d = wrap_dim(dim);
  if (start < 0 || length < 0 || start > shape_[d] || length > shape_[d] - start) {
    throw InvalidArgument(fmt::format("narrow({}, {}) out of range for dimension {} of size {}", start, length, d,
                                      shape_[d]));
  }
  return slice(d, {start, start + length});
}

Tensor Tensor::select(std::int64_t dim, std::int64_t index) const {
  check_defined("select");
  const std::int64_t d = wrap_dim(dim);
  const std::int64_t i = index < 0 ? index + shape_[d] : index;
  if (i < 0 || i >= shape_[d]) {
    throw InvalidArgument(fmt::format("select index {} out of range for dimension {} of size {}", index, d, shape_[d]));
  }
  Tensor out = *this;
  out.byte_offset_ += static_cast<std::size_t>(i * strides_[d]) * itemsize();
  out.shape_.erase(out.shape_.begin() + d);
  out.strides_.erase(out.strides_.begin() + d);
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) { return os << tensor.str(); }

}  // namespace tensortree
