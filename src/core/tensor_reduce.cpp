// Reductions over one dimension: sum, mean, amin, amax (torch's dtype rules, noted in tensor.hpp).
// The source is made contiguous on the host and viewed as [outer, n, inner]; a CUDA tensor goes
// through host memory and its result back to its device.
#include <cmath>
#include <complex>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/element_convert.hpp"
#include "core/text_format.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

namespace {

enum class Reduction { Sum, Mean, Min, Max };

const char* name_of(Reduction op) {
  switch (op) {
    case Reduction::Sum: return "sum";
    case Reduction::Mean: return "mean";
    case Reduction::Min: return "amin";
    case Reduction::Max: return "amax";
  }
  return "reduction";
}

struct Extent {
  std::int64_t outer = 1;
  std::int64_t n = 1;
  std::int64_t inner = 1;
};

// What min/max compare: the value itself for C++ arithmetic types, a float for the 16- and 8-bit
// floating formats.
template <class T>
auto ordered(T v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return v;
  } else {
    return static_cast<float>(v);
  }
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    const auto x = ordered(v);
    return x != x;
  }
}

template <class T>
void min_max(const T* src, T* dst, const Extent& e, bool is_max) {
  for (std::int64_t o = 0; o < e.outer; ++o) {
    for (std::int64_t i = 0; i < e.inner; ++i) {
      const T* column = src + o * e.n * e.inner + i;
      T best = column[0];
      for (std::int64_t k = 1; k < e.n && !is_nan(best); ++k) {
        const T v = column[k * e.inner];
        if (is_nan(v) || (is_max ? ordered(v) > ordered(best) : ordered(v) < ordered(best))) best = v;
      }
      dst[o * e.inner + i] = best;
    }
  }
}

// Sums (or means) of floating and complex elements, accumulated in double / complex<double>.
template <class T>
void sum_floating(const T* src, T* dst, const Extent& e, bool mean) {
  using Acc = std::conditional_t<detail::is_std_complex<T>, std::complex<double>, double>;
  for (std::int64_t o = 0; o < e.outer; ++o) {
    for (std::int64_t i = 0; i < e.inner; ++i) {
      Acc acc{};
      for (std::int64_t k = 0; k < e.n; ++k) {
        const T v = src[(o * e.n + k) * e.inner + i];
        if constexpr (detail::is_std_complex<T>) {
          acc += Acc(v.real(), v.imag());
        } else if constexpr (std::is_arithmetic_v<T>) {
          acc += static_cast<double>(v);
        } else {
          acc += static_cast<double>(static_cast<float>(v));
        }
      }
      if (mean) acc /= static_cast<double>(e.n);  // n == 0 gives NaN, as torch.mean does
      if constexpr (detail::is_std_complex<T>) {
        dst[o * e.inner + i] = T(static_cast<typename T::value_type>(acc.real()),
                                 static_cast<typename T::value_type>(acc.imag()));
      } else {
        dst[o * e.inner + i] = detail::element_from_double<T>(acc);
      }
    }
  }
}

// Integer and bool sums in int64, wrapping on overflow as PyTorch's do (through uint64: no UB).
template <class T>
void sum_integral(const T* src, std::int64_t* dst, const Extent& e) {
  for (std::int64_t o = 0; o < e.outer; ++o) {
    for (std::int64_t i = 0; i < e.inner; ++i) {
      std::uint64_t acc = 0;
      for (std::int64_t k = 0; k < e.n; ++k) {
        acc += static_cast<std::uint64_t>(src[(o * e.n + k) * e.inner + i]);
      }
      std::int64_t value;
      std::memcpy(&value, &acc, sizeof value);
      dst[o * e.inner + i] = value;
    }
  }
}

Tensor reduce(const Tensor& self, std::int64_t dim, bool keepdim, Reduction op) {
  const std::string what = name_of(op);
  if (!self.defined()) throw InvalidArgument(fmt::format("{} of an undefined tensor", what));
  const std::int64_t ndim = self.dim();
  const std::int64_t d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) {
    throw InvalidArgument(fmt::format("{}: no dimension {} in a tensor of shape {}", what, dim,
                                      shape_str(self.shape())));
  }
  const DType dtype = self.dtype();
  const bool integral = dtype == DType::Bool || is_integral(dtype);
  if (op == Reduction::Mean && integral) {
    throw InvalidArgument(fmt::format("mean needs a floating or complex dtype, not {}", dtype));
  }
  if ((op == Reduction::Min || op == Reduction::Max) && is_complex(dtype)) {
    throw NotSupported(fmt::format("{} of {} elements (complex numbers are unordered)", what, dtype));
  }
  const Shape& shape = self.shape();
  Extent e;
  for (std::int64_t k = 0; k < d; ++k) e.outer *= shape[k];
  e.n = shape[d];
  for (std::int64_t k = d + 1; k < ndim; ++k) e.inner *= shape[k];
  if ((op == Reduction::Min || op == Reduction::Max) && e.n == 0) {
    throw InvalidArgument(fmt::format("{} over dimension {} of size 0 in shape {} has no identity", what, d,
                                      shape_str(shape)));
  }
  Shape out_shape = shape;
  if (keepdim) {
    out_shape[d] = 1;
  } else {
    out_shape.erase(out_shape.begin() + d);
  }
  const Tensor src = self.to(Device::cpu()).contiguous();
  const DType out_dtype = op == Reduction::Sum && integral ? DType::Int64 : dtype;
  Tensor out = Tensor::empty(out_shape, {out_dtype, Device::cpu(), false});
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(src.data_ptr());
    if (op == Reduction::Min || op == Reduction::Max) {
      if constexpr (!detail::is_std_complex<T>) min_max(in, static_cast<T*>(out.data_ptr()), e, op == Reduction::Max);
    } else if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
      sum_integral(in, static_cast<std::int64_t*>(out.data_ptr()), e);
    } else {
      sum_floating(in, static_cast<T*>(out.data_ptr()), e, op == Reduction::Mean);
    }
  });
  return out.to(self.device());
}

}  // namespace

Tensor Tensor::sum(std::int64_t dim, bool keepdim) const { return reduce(*this, dim, keepdim, Reduction::Sum); }
Tensor Tensor::mean(std::int64_t dim, bool keepdim) const { return reduce(*this, dim, keepdim, Reduction::Mean); }
Tensor Tensor::amin(std::int64_t dim, bool keepdim) const { return reduce(*this, dim, keepdim, Reduction::Min); }
Tensor Tensor::amax(std::int64_t dim, bool keepdim) const { return reduce(*this, dim, keepdim, Reduction::Max); }

}  // namespace tensortree
