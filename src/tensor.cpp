#include "tensortree/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "cuda/cuda_api.hpp"
#include "element_convert.hpp"
#include "strided_copy.hpp"

namespace tensortree {

namespace {

std::string dims_str(std::int64_t dim, std::int64_t ndim) {
  return "dimension " + std::to_string(dim) + " (tensor has " + std::to_string(ndim) + ")";
}

// The last byte a view can touch, or 0 for an empty view; InvalidArgument on negative strides.
std::size_t view_extent_bytes(const Shape& shape, const Strides& strides, std::size_t itemsize) {
  std::int64_t last = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    if (strides[d] < 0) throw InvalidArgument("negative strides are not supported");
    last += (shape[d] - 1) * strides[d];
  }
  return static_cast<std::size_t>(last + 1) * itemsize;
}

Device resolve(Device device) {
  return device.is_cuda() && device.index() < 0 ? Device::cuda(cuda::current_device()) : device;
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
    throw InvalidArgument("shape " + shape_str(shape_) + " and strides " + shape_str(strides_) +
                          " differ in length");
  }
  numel_of(shape_);  // rejects negative dimensions and overflow
  const std::size_t extent = view_extent_bytes(shape_, strides_, itemsize());
  if (extent > 0 && byte_offset_ + extent > storage_->nbytes()) {
    throw InvalidArgument("view of shape " + shape_str(shape_) + " at byte offset " +
                          std::to_string(byte_offset_) + " needs " + std::to_string(extent) +
                          " bytes but the storage holds " + std::to_string(storage_->nbytes()));
  }
}

// ---- factories -----------------------------------------------------------------------------

Tensor Tensor::empty(Shape shape, TensorOptions options) {
  const std::int64_t n = numel_of(shape);
  auto storage = Storage::allocate(static_cast<std::size_t>(n) * tensortree::itemsize(options.dtype),
                                   options.device, options.pinned);
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
  TensorOptions host = options;
  host.device = Device::cpu();
  Tensor t = empty(std::move(shape), host);
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto* out = static_cast<T*>(t.data_ptr());
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      out[i] = detail::element_from_double<T>(start + static_cast<double>(i) * step);
    }
  });
  return options.device.is_cpu() ? t : t.to(options.device);
}

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, Device device,
                         Storage::Deleter deleter, Strides strides) {
  if (strides.empty()) strides = contiguous_strides(shape);
  if (strides.size() != shape.size()) {
    throw InvalidArgument("from_blob: shape " + shape_str(shape) + " and strides " +
                          shape_str(strides) + " differ in length");
  }
  const std::size_t extent = view_extent_bytes(shape, strides, tensortree::itemsize(dtype));
  auto storage = Storage::adopt(data, extent, device, std::move(deleter));
  return Tensor(std::move(storage), 0, dtype, std::move(shape), std::move(strides));
}

// ---- properties ----------------------------------------------------------------------------

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

std::int64_t Tensor::wrap_dim(std::int64_t dim) const {
  const std::int64_t n = this->dim();
  const std::int64_t wrapped = dim < 0 ? dim + n : dim;
  if (wrapped < 0 || wrapped >= n) throw InvalidArgument("no " + dims_str(dim, n));
  return wrapped;
}

std::int64_t Tensor::size(std::int64_t dim) const { return shape_[wrap_dim(dim)]; }

std::int64_t Tensor::numel() const { return numel_of(shape_); }

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
  if (!defined()) throw InvalidArgument(std::string(what) + " on an undefined tensor");
}

void Tensor::check_element_type(DType requested) const {
  if (requested != dtype_) {
    throw InvalidArgument("element type " + std::string(dtype_name(requested)) +
                          " requested from a tensor of dtype " + std::string(dtype_name(dtype_)));
  }
}

std::byte* Tensor::element_address(std::initializer_list<std::int64_t> index) const {
  check_defined("element access");
  if (!device().is_cpu()) throw InvalidArgument("element access needs a CPU tensor, not " + device().str());
  if (static_cast<std::int64_t>(index.size()) != dim()) {
    throw InvalidArgument("index of " + std::to_string(index.size()) + " coordinates for a tensor of " +
                          std::to_string(dim()) + " dimensions");
  }
  std::int64_t offset = 0;
  std::size_t d = 0;
  for (const std::int64_t i : index) {
    if (i < 0 || i >= shape_[d]) {
      throw InvalidArgument("index " + std::to_string(i) + " out of range for dimension " +
                            std::to_string(d) + " of size " + std::to_string(shape_[d]));
    }
    offset += i * strides_[d++];
  }
  return static_cast<std::byte*>(data_ptr()) + offset * static_cast<std::int64_t>(itemsize());
}

std::complex<double> Tensor::value_at_linear(std::int64_t linear_index) const {
  check_defined("value_at_linear");
  if (!device().is_cpu()) throw InvalidArgument("value_at_linear needs a CPU tensor");
  if (linear_index < 0 || linear_index >= numel()) {
    throw InvalidArgument("linear index " + std::to_string(linear_index) + " out of range for " +
                          std::to_string(numel()) + " elements");
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

Tensor Tensor::slice(std::int64_t dim, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  check_defined("slice");
  const std::int64_t d = wrap_dim(dim);
  if (step <= 0) throw InvalidArgument("slice step must be positive, got " + std::to_string(step));
  const std::int64_t n = shape_[d];
  auto clamp = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
  const std::int64_t begin = clamp(start);
  const std::int64_t end = std::max(clamp(stop), begin);
  Tensor out = *this;
  out.shape_[d] = (end - begin + step - 1) / step;
  out.strides_[d] = strides_[d] * step;
  if (out.shape_[d] > 0) {
    out.byte_offset_ += static_cast<std::size_t>(begin * strides_[d]) * itemsize();
  }
  return out;
}

Tensor Tensor::narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
  check_defined("narrow");
  const std::int64_t d = wrap_dim(dim);
  if (start < 0 || length < 0 || start + length > shape_[d]) {
    throw InvalidArgument("narrow(" + std::to_string(start) + ", " + std::to_string(length) +
                          ") out of range for dimension " + std::to_string(d) + " of size " +
                          std::to_string(shape_[d]));
  }
  return slice(d, start, start + length);
}

Tensor Tensor::select(std::int64_t dim, std::int64_t index) const {
  check_defined("select");
  const std::int64_t d = wrap_dim(dim);
  const std::int64_t i = index < 0 ? index + shape_[d] : index;
  if (i < 0 || i >= shape_[d]) {
    throw InvalidArgument("select index " + std::to_string(index) + " out of range for dimension " +
                          std::to_string(d) + " of size " + std::to_string(shape_[d]));
  }
  Tensor out = *this;
  out.byte_offset_ += static_cast<std::size_t>(i * strides_[d]) * itemsize();
  out.shape_.erase(out.shape_.begin() + d);
  out.strides_.erase(out.strides_.begin() + d);
  return out;
}

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
  check_defined("permute");
  if (static_cast<std::int64_t>(dims.size()) != dim()) {
    throw InvalidArgument("permute of " + std::to_string(dims.size()) + " dimensions for a tensor of " +
                          std::to_string(dim()));
  }
  Tensor out = *this;
  std::vector<bool> seen(shape_.size(), false);
  std::size_t i = 0;
  for (const std::int64_t requested : dims) {
    const std::int64_t d = wrap_dim(requested);
    if (seen[d]) throw InvalidArgument("permute repeats " + dims_str(requested, dim()));
    seen[d] = true;
    out.shape_[i] = shape_[d];
    out.strides_[i] = strides_[d];
    ++i;
  }
  return out;
}

Tensor Tensor::view(Shape shape) const {
  check_defined("view");
  if (!is_contiguous()) throw InvalidArgument("view needs a contiguous tensor; use reshape()");
  const std::int64_t total = numel();
  std::int64_t known = 1;
  std::int64_t inferred = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) throw InvalidArgument("view shape " + shape_str(shape) + " has two -1 entries");
      inferred = static_cast<std::int64_t>(i);
    } else {
      if (shape[i] < 0) throw InvalidArgument("negative dimension in view shape " + shape_str(shape));
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) {
      throw InvalidArgument("cannot view " + shape_str(shape_) + " as " + shape_str(shape));
    }
    shape[static_cast<std::size_t>(inferred)] = total / known;
    known = total;
  }
  if (known != total) {
    throw InvalidArgument("view shape " + shape_str(shape) + " holds " + std::to_string(known) +
                          " elements, tensor of shape " + shape_str(shape_) + " has " +
                          std::to_string(total));
  }
  Tensor out = *this;
  out.strides_ = contiguous_strides(shape);
  out.shape_ = std::move(shape);
  return out;
}

Tensor Tensor::reshape(Shape shape) const { return contiguous().view(std::move(shape)); }

// ---- copies --------------------------------------------------------------------------------

Tensor Tensor::contiguous() const {
  check_defined("contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  check_defined("clone");
  Tensor out = empty(shape_, {dtype_, device(), false});
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device target) const {
  check_defined("to");
  target = resolve(target);
  if (target == device()) return *this;
  Tensor out = empty(shape_, {dtype_, target, false});
  out.copy_(*this);
  return out;
}

void Tensor::copy_(const Tensor& src) const {
  check_defined("copy_");
  src.check_defined("copy_ source");
  if (src.shape_ != shape_ || src.dtype_ != dtype_) {
    throw InvalidArgument("copy_ from " + std::string(dtype_name(src.dtype_)) + shape_str(src.shape_) +
                          " into " + std::string(dtype_name(dtype_)) + shape_str(shape_));
  }
  if (numel() == 0) return;
  const Device here = device();
  const Device there = src.device();
  if (here == there) {
    const auto dst_view = detail::strided_view_of(*this);
    const auto src_view = detail::strided_view_of(src);
    if (here.is_cpu()) {
      detail::copy_strided_cpu(dst_view, src_view, itemsize());
    } else if (is_contiguous() && src.is_contiguous()) {
      cuda::copy_bytes(data_ptr(), src.data_ptr(), nbytes());
    } else {
      cuda::copy_strided(dst_view, src_view, itemsize(), here.index());
    }
    return;
  }
  // Across devices the bytes must be dense on both ends of the transfer.
  const Tensor dense_src = src.contiguous();
  if (is_contiguous()) {
    cuda::copy_bytes(data_ptr(), dense_src.data_ptr(), nbytes());
    return;
  }
  const Tensor staged = empty(shape_, {dtype_, here, false});
  cuda::copy_bytes(staged.data_ptr(), dense_src.data_ptr(), nbytes());
  copy_(staged);
}

void Tensor::fill_(double value) const {
  check_defined("fill_");
  if (numel() == 0) return;
  if (!device().is_cpu() || !is_contiguous()) {
    copy_(full(shape_, value, {dtype_, Device::cpu(), false}));
    return;
  }
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T v = detail::element_from_double<T>(value);
    auto* out = static_cast<T*>(data_ptr());
    std::fill(out, out + numel(), v);
  });
}

// ---- comparison ----------------------------------------------------------------------------

namespace {

template <class T>
bool elements_equal(const std::byte* a, const std::byte* b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return std::memcmp(a, b, sizeof(T)) == 0;  // exact for 64-bit values too
  } else {
    return detail::load_element<T>(a) == detail::load_element<T>(b);
  }
}

}  // namespace

bool Tensor::equal(const Tensor& other) const {
  check_defined("equal");
  other.check_defined("equal");
  if (shape_ != other.shape_ || dtype_ != other.dtype_) return false;
  const Tensor a = to(Device::cpu()).contiguous();
  const Tensor b = other.to(Device::cpu()).contiguous();
  const auto* pa = static_cast<const std::byte*>(a.data_ptr());
  const auto* pb = static_cast<const std::byte*>(b.data_ptr());
  const auto size = itemsize();
  const std::int64_t n = numel();
  return visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < n; ++i) {
      if (!elements_equal<T>(pa + i * size, pb + i * size)) return false;
    }
    return true;
  });
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) { return os << tensor.str(); }

}  // namespace tensortree
