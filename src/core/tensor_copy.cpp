// Tensor copies: contiguous, clone, to(device), copy_, fill_ (CPU loops or the CUDA runtime).
#include <algorithm>
#include <string>

#include "core/cuda_api.hpp"
#include "core/element_convert.hpp"
#include "core/strided_copy.hpp"
#include "core/text_format.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

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
  target = resolve_device(target);
  if (target == device()) return *this;
  Tensor out = empty(shape_, {dtype_, target, false});
  out.copy_(*this);
  return out;
}

void Tensor::copy_(const Tensor& src) const {
  check_defined("copy_");
  src.check_defined("copy_ source");
  if (src.shape_ != shape_ || src.dtype_ != dtype_) {
    throw InvalidArgument(fmt::format("copy_ from {}{} into {}{}", src.dtype_, shape_str(src.shape_), dtype_,
                                      shape_str(shape_)));
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
  visit_dtype(dtype_, [&](auto tag) { detail::scalar_to_element<decltype(tag)>(value, "fill_"); });
  if (numel() == 0) return;
  if (!device().is_cpu() || !is_contiguous()) {
    copy_(full(shape_, value, {dtype_, Device::cpu(), false}));
    return;
  }
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T v = detail::scalar_to_element<T>(value, "fill_");
    auto* out = static_cast<T*>(data_ptr());
    std::fill(out, out + numel(), v);
  });
}

}  // namespace tensortree
