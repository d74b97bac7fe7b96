// Element selection by a bool mask: Tensor::where and masked_fill_. CPU loops; a CUDA operand is
// staged through host memory with the device-generic copies (these serve tree methods, not
// kernels).
#include <array>
#include <cstring>
#include <string>

#include "core/element_convert.hpp"
#include "core/tensor_iter.hpp"
#include "core/text_format.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

namespace {

void check_mask(const char* operation, const Tensor& mask) {
  if (!mask.defined()) throw InvalidArgument(fmt::format("{}: the mask is an undefined tensor", operation));
  if (mask.dtype() != DType::Bool) {
    throw InvalidArgument(fmt::format("{}: the mask must be bool, not {}", operation, mask.dtype()));
  }
}

bool mask_at(const Tensor& host_mask, std::int64_t offset) {
  std::uint8_t raw = 0;  // read as a byte: any non-zero byte is true
  std::memcpy(&raw, static_cast<const std::byte*>(host_mask.data_ptr()) + offset, 1);
  return raw != 0;
}

}  // namespace

Tensor Tensor::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_mask("where", cond);
  a.check_defined("where");
  b.check_defined("where");
  if (a.dtype() != b.dtype()) {
    throw InvalidArgument(fmt::format("where: the two sources differ in dtype ({} and {})", a.dtype(), b.dtype()));
  }
  if (a.device() != b.device()) {
    throw InvalidArgument(fmt::format("where: the two sources are on {} and {}", a.device(), b.device()));
  }
  const std::array<const Shape*, 3> shapes{&cond.shape(), &a.shape(), &b.shape()};
  const Shape shape = detail::broadcast_shapes("where", shapes);
  const Tensor c = cond.to(Device::cpu()).expand(shape);
  const Tensor x = a.to(Device::cpu()).expand(shape);
  const Tensor y = b.to(Device::cpu()).expand(shape);
  Tensor out = empty(shape, {a.dtype(), Device::cpu(), false});
  const std::array<Strides, 4> strides{out.strides(), c.strides(), x.strides(), y.strides()};
  const auto size = static_cast<std::int64_t>(a.itemsize());
  auto* dst = static_cast<std::byte*>(out.data_ptr());
  const auto* px = static_cast<const std::byte*>(x.data_ptr());
  const auto* py = static_cast<const std::byte*>(y.data_ptr());
  detail::for_each_offset(shape, strides, [&](const std::array<std::int64_t, 4>& at) {
    const std::byte* from = mask_at(c, at[1]) ? px + at[2] * size : py + at[3] * size;
    std::memcpy(dst + at[0] * size, from, static_cast<std::size_t>(size));
  });
  return out.to(a.device());
}

void Tensor::masked_fill_(const Tensor& mask, double value) const {
  check_defined("masked_fill_");
  check_mask("masked_fill_", mask);
  const std::array<const Shape*, 2> shapes{&shape_, &mask.shape()};
  if (detail::broadcast_shapes("masked_fill_", shapes) != shape_) {
    throw InvalidArgument(fmt::format("masked_fill_: a mask of shape {} does not broadcast to the tensor's shape {}",
                                      shape_str(mask.shape()), shape_str(shape_)));
  }
  const bool on_host = device().is_cpu();
  const Tensor target = on_host ? *this : to(Device::cpu());
  const Tensor m = mask.to(Device::cpu()).expand(shape_);
  const std::array<Strides, 2> strides{target.strides(), m.strides()};
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T v = detail::scalar_to_element<T>(value, "masked_fill_");
    auto* dst = static_cast<std::byte*>(target.data_ptr());
    detail::for_each_offset(shape_, strides, [&](const std::array<std::int64_t, 2>& at) {
      if (mask_at(m, at[1])) std::memcpy(dst + at[0] * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
    });
  });
  if (!on_host) copy_(target);
}

}  // namespace tensortree
