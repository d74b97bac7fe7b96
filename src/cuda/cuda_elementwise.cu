// The element-wise kernel family behind Tensor's arithmetic, comparisons and casts on a GPU: one
// grid-stride kernel that walks the output's shape and reads each operand through its own strides
// (stride 0 where broadcast), parameterised by a functor built from core/elementwise.hpp's
// operations, so host and device compute alike.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/cuda_api.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "cuda/cuda_messages.hpp"
#include "cuda/stream_order.hpp"

namespace tensortree::cuda {

namespace {

using detail::BinaryOp;
using detail::StridedView;
using detail::UnaryOp;

// Storage and compute types on the device: bool as a byte, the 16-bit floats computed in float.
template <class T>
struct DeviceElement {
  using storage = T;
  using compute = T;
  __device__ static compute load(storage v) { return v; }
  __device__ static storage store(compute c) { return c; }
};
template <>
struct DeviceElement<bool> {
  using storage = std::uint8_t;
  using compute = bool;
  __device__ static bool load(std::uint8_t v) { return v != 0; }
  __device__ static std::uint8_t store(bool c) { return c ? 1 : 0; }
};
template <>
struct DeviceElement<__half> {
  using storage = __half;
  using compute = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float c) { return __float2half_rn(c); }
};
template <>
struct DeviceElement<__nv_bfloat16> {
  using storage = __nv_bfloat16;
  using compute = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float c) { return __float2bfloat16_rn(c); }
};

// fn(T{}) for the dtypes the kernels compute; NotSupported for the others.
template <class Fn>
void visit_device_dtype(const char* operation, DType dtype, const Fn& fn) {
  switch (dtype) {
    case DType::Bool: return fn(bool{});
    case DType::UInt8: return fn(std::uint8_t{});
    case DType::UInt16: return fn(std::uint16_t{});
    case DType::UInt32: return fn(std::uint32_t{});
    case DType::UInt64: return fn(std::uint64_t{});
    case DType::Int8: return fn(std::int8_t{});
    case DType::Int16: return fn(std::int16_t{});
    case DType::Int32: return fn(std::int32_t{});
    case DType::Int64: return fn(std::int64_t{});
    case DType::Float16: return fn(__half{});
    case DType::BFloat16: return fn(__nv_bfloat16{});
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    default: throw_unsupported_kernel_dtype(operation, static_cast<std::uint8_t>(dtype));
  }
}

template <class C>
inline constexpr bool is_floating = std::is_floating_point_v<C>;

// out[i] = fn(a[i]) or fn(a[i], b[i]): element offsets from the output's shape and each view's strides.
template <class Out, class A, class B, class Fn>
__global__ void map_kernel(StridedView out, StridedView a, StridedView b, std::int64_t numel, Fn fn) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < numel; i += step) {
    std::int64_t rest = i;
    std::int64_t o = 0;
    std::int64_t oa = 0;
    std::int64_t ob = 0;
    for (int d = out.ndim - 1; d >= 0; --d) {
      const std::int64_t coord = rest % out.shape[d];
      rest /= out.shape[d];
      o += coord * out.strides[d];
      oa += coord * a.strides[d];
      ob += coord * b.strides[d];
    }
    const A x = reinterpret_cast<const A*>(a.data)[oa];
    if constexpr (std::is_same_v<B, void>) {
      reinterpret_cast<Out*>(out.data)[o] = fn(x);
    } else {
      reinterpret_cast<Out*>(out.data)[o] = fn(x, reinterpret_cast<const B*>(b.data)[ob]);
    }
  }
}

template <class Out, class A, class B = void, class Fn>
void launch(const StridedView& out, const StridedView& a, const StridedView& b, Fn fn) {
  std::int64_t numel = 1;
  for (int d = 0; d < out.ndim; ++d) numel *= out.shape[d];
  if (numel == 0) return;
  constexpr int kThreads = 256;
  const std::int64_t blocks = (numel + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 ? blocks : 65535);
  map_kernel<Out, A, B><<<grid, kThreads>>>(out, a, b, numel, fn);
  TT_CUDA_CHECK(cudaGetLastError());
  TT_CUDA_CHECK(cudaDeviceSynchronize());
}

template <BinaryOp Op, class T>
struct BinaryFn {
  using E = DeviceElement<T>;
  using S = typename E::storage;
  __device__ auto operator()(S x, S y) const {
    if constexpr (detail::is_comparison(Op)) {
      return static_cast<std::uint8_t>(detail::compare<Op>(E::load(x), E::load(y)) ? 1 : 0);
    } else {
      return E::store(detail::arithmetic<Op>(E::load(x), E::load(y)));
    }
  }
};

template <BinaryOp Op, class T>
struct ScalarFn {
  using E = DeviceElement<T>;
  using S = typename E::storage;
  using C = typename E::compute;
  C scalar;
  bool scalar_first;
  __device__ auto operator()(S x) const {
    const C v = E::load(x);
    if constexpr (detail::is_comparison(Op)) {
      return static_cast<std::uint8_t>(detail::compare<Op>(v, scalar) ? 1 : 0);
    } else {
      return E::store(scalar_first ? detail::arithmetic<Op>(scalar, v) : detail::arithmetic<Op>(v, scalar));
    }
  }
};

template <UnaryOp Op, class T>
struct UnaryFn {
  using E = DeviceElement<T>;
  using S = typename E::storage;
  using C = typename E::compute;
  C lo;
  C hi;
  __device__ S operator()(S x) const {
    const C v = E::load(x);
    if constexpr (Op == UnaryOp::Neg || Op == UnaryOp::Abs) {
      if constexpr (std::is_unsigned_v<C>) {
        return E::store(Op == UnaryOp::Neg ? static_cast<C>(C{0} - v) : v);
      } else if constexpr (std::is_integral_v<C>) {
        using W = detail::wrapping_t<C>;
        const C negated = static_cast<C>(W{0} - static_cast<W>(v));  // wraps, as on the host
        return E::store(Op == UnaryOp::Neg || v < C{0} ? negated : v);
      } else {
        return E::store(Op == UnaryOp::Neg ? -v : (v < C{0} ? -v : v));
      }
    } else if constexpr (Op == UnaryOp::Clamp) {
      return E::store(detail::clamp_value(v, lo, hi));
    } else if constexpr (Op == UnaryOp::Sqrt) {
      return E::store(::sqrt(v));
    } else if constexpr (Op == UnaryOp::Exp) {
      return E::store(::exp(v));
    } else {
      return E::store(::log(v));
    }
  }
};

template <class To, class From>
struct ConvertFn {
  __device__ typename DeviceElement<To>::storage operator()(typename DeviceElement<From>::storage x) const {
    using TC = typename DeviceElement<To>::compute;
    return DeviceElement<To>::store(detail::convert_real<TC>(DeviceElement<From>::load(x)));
  }
};

}  // namespace

void elementwise_binary(BinaryOp op, DType dtype, const StridedView& out, const StridedView& a, const StridedView& b,
                        int device) {
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  visit_device_dtype("element-wise operation", dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = typename DeviceElement<T>::storage;
    using C = typename DeviceElement<T>::compute;
    detail::with_op(op, [&](auto o) {
      constexpr BinaryOp kOp = decltype(o)::value;
      if constexpr (detail::has_loop<kOp, C>()) {
        using Out = std::conditional_t<detail::is_comparison(kOp), std::uint8_t, S>;
        launch<Out, S, S>(out, a, b, BinaryFn<kOp, T>{});
      }
    });
  });
}

void elementwise_scalar(BinaryOp op, DType dtype, const StridedView& out, const StridedView& a, double scalar,
                        bool scalar_first, int device) {
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  visit_device_dtype("element-wise operation with a scalar", dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = typename DeviceElement<T>::storage;
    using C = typename DeviceElement<T>::compute;
    if constexpr (is_floating<C>) {
      detail::with_op(op, [&](auto o) {
        constexpr BinaryOp kOp = decltype(o)::value;
        using Out = std::conditional_t<detail::is_comparison(kOp), std::uint8_t, S>;
        launch<Out, S>(out, a, a, ScalarFn<kOp, T>{static_cast<C>(scalar), scalar_first});
      });
    }
  });
}

void elementwise_unary(UnaryOp op, DType dtype, const StridedView& out, const StridedView& a,
                       double lo, double hi, int device) {
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  visit_device_dtype("element-wise function", dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = typename DeviceElement<T>::storage;
    using C = typename DeviceElement<T>::compute;
    if constexpr (!std::is_same_v<C, bool>) {
      const C l = is_floating<C> ? static_cast<C>(lo) : C{};
      const C h = is_floating<C> ? static_cast<C>(hi) : C{};
      switch (op) {
        case UnaryOp::Neg: return launch<S, S>(out, a, a, UnaryFn<UnaryOp::Neg, T>{l, h});
        case UnaryOp::Abs: return launch<S, S>(out, a, a, UnaryFn<UnaryOp::Abs, T>{l, h});
        case UnaryOp::Sqrt:
        case UnaryOp::Exp:
        case UnaryOp::Log:
        case UnaryOp::Clamp:
          if constexpr (is_floating<C>) {
            if (op == UnaryOp::Sqrt) return launch<S, S>(out, a, a, UnaryFn<UnaryOp::Sqrt, T>{l, h});
            if (op == UnaryOp::Exp) return launch<S, S>(out, a, a, UnaryFn<UnaryOp::Exp, T>{l, h});
            if (op == UnaryOp::Log) return launch<S, S>(out, a, a, UnaryFn<UnaryOp::Log, T>{l, h});
            return launch<S, S>(out, a, a, UnaryFn<UnaryOp::Clamp, T>{l, h});
          }
          return;
      }
    }
  });
}

void convert(const StridedView& out, DType out_dtype, const StridedView& in, DType in_dtype, int device) {
  DeviceGuard guard(device);
  detail::order_after_current_stream();
  visit_device_dtype("conversion", out_dtype, [&](auto to_tag) {
    using To = decltype(to_tag);
    visit_device_dtype("conversion", in_dtype, [&](auto from_tag) {
      using From = decltype(from_tag);
      launch<typename DeviceElement<To>::storage, typename DeviceElement<From>::storage>(out, in, in,
                                                                                          ConvertFn<To, From>{});
    });
  });
}

}  // namespace tensortree::cuda
