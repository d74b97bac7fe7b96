// Tensor comparison: equal (exact) and allclose (within tolerances).
#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/element_convert.hpp"
#include "core/tensor_iter.hpp"
#include "core/text_format.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

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

namespace {

// torch.isclose with equal_nan=False: exact equality first (so inf is close to inf), then the
// tolerance test, which NaN and the remaining infinities fail.
bool close(std::complex<double> a, std::complex<double> b, double rtol, double atol) {
  if (a == b) return true;
  const double diff = std::abs(a - b);
  if (!std::isfinite(diff)) return false;
  return diff <= atol + rtol * std::abs(b);
}

}  // namespace

bool Tensor::allclose(const Tensor& other, double rtol, double atol) const {
  check_defined("allclose");
  other.check_defined("allclose");
  if (dtype_ != other.dtype_) {
    throw InvalidArgument(fmt::format("allclose of {} and {} tensors: dtypes must match", dtype_, other.dtype_));
  }
  const std::array<const Shape*, 2> shapes{&shape_, &other.shape_};
  const Shape shape = detail::broadcast_shapes("allclose", shapes);
  const Tensor a = to(Device::cpu()).expand(shape);
  const Tensor b = other.to(Device::cpu()).expand(shape);
  const std::array<Strides, 2> strides{a.strides(), b.strides()};
  const auto size = static_cast<std::int64_t>(itemsize());
  const auto* pa = static_cast<const std::byte*>(a.data_ptr());
  const auto* pb = static_cast<const std::byte*>(b.data_ptr());
  bool all = true;
  detail::for_each_offset(shape, strides, [&](const std::array<std::int64_t, 2>& at) {
    if (all && !close(detail::load_element(dtype_, pa + at[0] * size), detail::load_element(dtype_, pb + at[1] * size),
                      rtol, atol)) {
      all = false;
    }
  });
  return all;
}

}  // namespace tensortree
