// Element-wise arithmetic and comparisons on tensors, with PyTorch's broadcasting and type
// promotion (type_promotion.cpp). Operands are first converted to the compute dtype and broadcast
// as stride-0 views; then one loop runs: elementwise_cpu.hpp's on the host, one kernel on a GPU
// (cuda_elementwise.cu).
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "core/cuda_api.hpp"
#include "core/element_types.hpp"
#include "core/elementwise.hpp"
#include "core/elementwise_cpu.hpp"
#include "core/strided_copy.hpp"
#include "core/tensor_iter.hpp"
#include "core/text_format.hpp"
#include "core/type_promotion.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

namespace {

using detail::BinaryOp;
using detail::ElementType;
using detail::UnaryOp;
using detail::has_loop;
using detail::is_inexact;
using detail::with_op;

const char* name_of(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Eq: return "eq";
    case BinaryOp::Ne: return "ne";
    case BinaryOp::Lt: return "lt";
    case BinaryOp::Le: return "le";
    case BinaryOp::Gt: return "gt";
    case BinaryOp::Ge: return "ge";
  }
  return "element-wise operation";
}

const char* name_of(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Clamp: return "clamp";
  }
  return "element-wise operation";
}

template <class Fn>
void with_op(UnaryOp op, const Fn& fn) {
  switch (op) {
#define TT_OP_CASE(O) \
  case UnaryOp::O: return fn(std::integral_constant<UnaryOp, UnaryOp::O>{});
    TT_OP_CASE(Neg)
    TT_OP_CASE(Abs)
    TT_OP_CASE(Sqrt)
    TT_OP_CASE(Exp)
    TT_OP_CASE(Log)
    TT_OP_CASE(Clamp)
#undef TT_OP_CASE
  }
}

// out = a op b on the host; a and b hold the compute dtype, broadcast to out's shape.
template <BinaryOp Op>
void binary_cpu(const Tensor& out, const Tensor& a, const Tensor& b) {
  visit_dtype(a.dtype(), [&](auto tag) {
    using E = ElementType<decltype(tag)>;
    using S = typename E::storage;
    using C = typename E::compute;
    if constexpr (!has_loop<Op, C>()) {
      return;
    } else if constexpr (detail::is_comparison(Op)) {
      detail::map_elements<std::uint8_t, S, S>(out, a, b, [](S x, S y) -> std::uint8_t {
        return detail::compare<Op>(E::load(x), E::load(y)) ? 1 : 0;
      });
    } else {
      detail::map_elements<S, S, S>(out, a, b,
                                    [](S x, S y) { return E::store(detail::arithmetic<Op>(E::load(x), E::load(y))); });
    }
  });
}

// out = a op s, or s op a with scalar_first; a holds a floating or complex compute dtype.
template <BinaryOp Op>
void scalar_cpu(const Tensor& out, const Tensor& a, double scalar, bool scalar_first) {
  visit_dtype(a.dtype(), [&](auto tag) {
    using E = ElementType<decltype(tag)>;
    using S = typename E::storage;
    using C = typename E::compute;
    if constexpr (is_inexact<C> && has_loop<Op, C>()) {
      const C s = static_cast<C>(scalar);
      if constexpr (detail::is_comparison(Op)) {
        // Comparisons with the scalar first are turned around before they get here.
        detail::map_elements<std::uint8_t, S>(
            out, a, [s](S x) -> std::uint8_t { return detail::compare<Op>(E::load(x), s) ? 1 : 0; });
      } else if (scalar_first) {
        detail::map_elements<S, S>(out, a, [s](S x) { return E::store(detail::arithmetic<Op>(s, E::load(x))); });
      } else {
        detail::map_elements<S, S>(out, a, [s](S x) { return E::store(detail::arithmetic<Op>(E::load(x), s)); });
      }
    }
  });
}

template <class C>
C negated(C x) {
  if constexpr (std::is_integral_v<C>) {
    using W = detail::wrapping_t<C>;
    return static_cast<C>(W{0} - static_cast<W>(x));  // wraps: -INT_MIN is INT_MIN, as in PyTorch
  } else {
    return -x;
  }
}

template <UnaryOp Op>
void unary_cpu(const Tensor& out, const Tensor& a, double lo, double hi) {
  visit_dtype(a.dtype(), [&](auto tag) {
    using E = ElementType<decltype(tag)>;
    using S = typename E::storage;
    using C = typename E::compute;
    if constexpr (std::is_same_v<C, bool>) {
      return;  // refused by unary()
    } else if constexpr (Op == UnaryOp::Abs && detail::is_std_complex<C>) {
      detail::map_elements<typename C::value_type, S>(out, a, [](S x) { return std::abs(x); });
    } else if constexpr (Op == UnaryOp::Neg) {
      detail::map_elements<S, S>(out, a, [](S x) { return E::store(negated(E::load(x))); });
    } else if constexpr (Op == UnaryOp::Abs) {
      detail::map_elements<S, S>(out, a, [](S x) {
        const C v = E::load(x);
        if constexpr (std::is_unsigned_v<C>) {
          return E::store(v);
        } else {
          return E::store(v < C{0} ? negated(v) : v);
        }
      });
    } else if constexpr (Op == UnaryOp::Clamp) {
      if constexpr (std::is_floating_point_v<C>) {
        const C l = static_cast<C>(lo);
        const C h = static_cast<C>(hi);
        detail::map_elements<S, S>(out, a, [l, h](S x) { return E::store(detail::clamp_value(E::load(x), l, h)); });
      }
    } else if constexpr (is_inexact<C>) {
      detail::map_elements<S, S>(out, a, [](S x) {
        if constexpr (Op == UnaryOp::Sqrt) {
          return E::store(std::sqrt(E::load(x)));
        } else if constexpr (Op == UnaryOp::Exp) {
          return E::store(std::exp(E::load(x)));
        } else {
          return E::store(std::log(E::load(x)));
        }
      });
    }
  });
}

// Runs loop(out, inputs...) on the host; for a GPU `out`, on host copies whose result is copied
// back. The CUDA kernels compute real dtypes only: complex and float8 operands take this detour.
template <class Loop, class... Inputs>
void on_host(const Tensor& out, const Loop& loop, const Inputs&... inputs) {
  if (out.device().is_cpu()) {
    loop(out, inputs...);
    return;
  }
  const Tensor host = Tensor::empty(out.shape(), {out.dtype(), Device::cpu(), false});
  loop(host, inputs.to(Device::cpu())...);
  out.copy_(host);
}

void run_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!out.device().is_cpu() && detail::kernel_computes(a.dtype())) {
    cuda::elementwise_binary(op, a.dtype(), detail::strided_view_of(out), detail::strided_view_of(a),
                             detail::strided_view_of(b), out.device().index());
    return;
  }
  on_host(out, [op](const Tensor& o, const Tensor& x, const Tensor& y) {
    with_op(op, [&](auto k) { binary_cpu<decltype(k)::value>(o, x, y); });
  }, a, b);
}

void run_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar, bool scalar_first) {
  if (!out.device().is_cpu() && detail::kernel_computes(a.dtype())) {
    cuda::elementwise_scalar(op, a.dtype(), detail::strided_view_of(out), detail::strided_view_of(a), scalar,
                             scalar_first, out.device().index());
    return;
  }
  on_host(out, [&](const Tensor& o, const Tensor& x) {
    with_op(op, [&](auto k) { scalar_cpu<decltype(k)::value>(o, x, scalar, scalar_first); });
  }, a);
}

void run_unary(UnaryOp op, const Tensor& out, const Tensor& a, double lo, double hi) {
  if (!out.device().is_cpu() && detail::kernel_computes(a.dtype()) && out.dtype() == a.dtype()) {
    cuda::elementwise_unary(op, a.dtype(), detail::strided_view_of(out), detail::strided_view_of(a), lo, hi,
                            out.device().index());
    return;
  }
  on_host(out, [&](const Tensor& o, const Tensor& x) {
    with_op(op, [&](auto k) { unary_cpu<decltype(k)::value>(o, x, lo, hi); });
  }, a);
}

// ---- checks and result dtypes ----------------------------------------------------------------

std::string operands(BinaryOp op, const Tensor& a, const Tensor& b) {
  return fmt::format("{} of {}{} and {}{}", name_of(op), a.dtype(), shape_str(a.shape()), b.dtype(),
                     shape_str(b.shape()));
}

std::string operands(BinaryOp op, const Tensor& a, double scalar) {
  return fmt::format("{} of {}{} and the scalar {}", name_of(op), a.dtype(), shape_str(a.shape()), scalar);
}

void check_defined(const char* operation, const Tensor& a) {
  if (!a.defined()) throw InvalidArgument(fmt::format("{} of an undefined tensor", operation));
}

void check_pair(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_defined(name_of(op), a);
  check_defined(name_of(op), b);
  if (a.device() != b.device()) {
    throw InvalidArgument(fmt::format("{}: the operands are on {} and {}", operands(op, a, b), a.device(), b.device()));
  }
}

// The dtype `op` computes in, given the promoted dtype of its operands; refuses what PyTorch does.
template <class What>
DType compute_dtype(BinaryOp op, DType promoted, const What& what) {
  const DType c = op == BinaryOp::Div ? detail::floating_result(promoted) : promoted;
  if (op == BinaryOp::Sub && c == DType::Bool) {
    throw InvalidArgument(fmt::format("{}: subtraction of bool tensors is not supported (as in PyTorch); ne gives "
                                      "the exclusive or", what()));
  }
  if (detail::is_comparison(op) && op != BinaryOp::Eq && op != BinaryOp::Ne && is_complex(c)) {
    throw InvalidArgument(fmt::format("{}: complex numbers are unordered", what()));
  }
  return c;
}

DType compute_dtype(BinaryOp op, const Tensor& a, const Tensor& b) {
  const auto what = [&] { return operands(op, a, b); };
  DType promoted;
  try {
    promoted = promote_types(a.dtype(), b.dtype());
  } catch (const NotSupported& e) {
    throw NotSupported(fmt::format("{}: {}", what(), e.what()));
  }
  return compute_dtype(op, promoted, what);
}

DType compute_dtype(BinaryOp op, const Tensor& a, double scalar) {
  return compute_dtype(op, detail::promote_with_scalar(a.dtype()), [&] { return operands(op, a, scalar); });
}

Shape broadcast(BinaryOp op, const Tensor& a, const Tensor& b) {
  const std::array<const Shape*, 2> shapes{&a.shape(), &b.shape()};
  return detail::broadcast_shapes(name_of(op), shapes);
}

DType result_dtype(BinaryOp op, DType compute) { return detail::is_comparison(op) ? DType::Bool : compute; }

// An in-place result must cast back to the tensor written (PyTorch's canCast) and keep its shape.
template <class What>
void check_writable(BinaryOp op, const Tensor& self, DType result, const Shape& shape, const What& what) {
  if (!can_cast(result, self.dtype())) {
    throw InvalidArgument(fmt::format("{}_: the result dtype {} cannot be written into a {} tensor ({})", name_of(op),
                                      result, self.dtype(), what()));
  }
  if (shape != self.shape()) {
    throw InvalidArgument(fmt::format("{}_: the result shape {} differs from the written tensor's shape {} ({})",
                                      name_of(op), shape_str(shape), shape_str(self.shape()), what()));
  }
}

// ---- the operations --------------------------------------------------------------------------

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_pair(op, a, b);
  const DType c = compute_dtype(op, a, b);
  const Shape shape = broadcast(op, a, b);
  Tensor out = Tensor::empty(shape, {result_dtype(op, c), a.device(), false});
  run_binary(op, out, a.to(c).expand(shape), b.to(c).expand(shape));
  return out;
}

// An integer scalar with a bool or integer tensor, as PyTorch's wrapped Python int: a 0-dim operand of
// the tensor's dtype (int64 for bool), converted as a cast converts (wrapping), so that the result
// keeps that dtype. Null for the others, which compute with the scalar as a double: floating
// values, floating and complex tensors, and comparisons with an integer the dtype cannot hold
// (compared by value instead of after wrapping).
std::optional<Tensor> integer_operand(BinaryOp op, const Tensor& a, Scalar scalar) {
  if (!scalar.is_integral() || is_floating_point(a.dtype()) || is_complex(a.dtype())) return std::nullopt;
  const DType dtype = a.dtype() == DType::Bool ? DType::Int64 : a.dtype();
  const std::int64_t value = scalar.to_int64();
  Tensor operand = Tensor::empty(Shape{}, {DType::Int64});
  *operand.data<std::int64_t>() = value;
  operand = operand.to(dtype);
  if (detail::is_comparison(op) && *operand.to(DType::Int64).data<std::int64_t>() != value) return std::nullopt;
  return a.device().is_cpu() ? operand : operand.to(a.device());
}

Tensor binary(BinaryOp op, const Tensor& a, Scalar number, bool scalar_first = false) {
  check_defined(name_of(op), a);
  if (const std::optional<Tensor> operand = integer_operand(op, a, number)) {
    return scalar_first ? binary(op, *operand, a) : binary(op, a, *operand);
  }
  const double scalar = number.to_double();
  const DType c = compute_dtype(op, a, scalar);
  Tensor out = Tensor::empty(a.shape(), {result_dtype(op, c), a.device(), false});
  run_scalar(op, out, a.to(c), scalar, scalar_first);
  return out;
}

const Tensor& binary_(BinaryOp op, const Tensor& self, const Tensor& other) {
  check_pair(op, self, other);
  const DType c = compute_dtype(op, self, other);
  const Shape shape = broadcast(op, self, other);
  check_writable(op, self, c, shape, [&] { return operands(op, self, other); });
  if (c == self.dtype()) {
    run_binary(op, self, self, other.to(c).expand(shape));
  } else {
    self.copy_(binary(op, self, other).to(self.dtype()));
  }
  return self;
}

const Tensor& binary_(BinaryOp op, const Tensor& self, Scalar number) {
  check_defined(name_of(op), self);
  if (const std::optional<Tensor> operand = integer_operand(op, self, number)) return binary_(op, self, *operand);
  const double scalar = number.to_double();
  const DType c = compute_dtype(op, self, scalar);
  check_writable(op, self, c, self.shape(), [&] { return operands(op, self, scalar); });
  run_scalar(op, self, self, scalar, false);  // c is self's dtype: only floating and complex ones get here
  return self;
}

DType complex_to_real(DType dtype) {
  if (dtype == DType::Complex64) return DType::Float32;
  if (dtype == DType::Complex128) return DType::Float64;
  return dtype;
}

Tensor unary(UnaryOp op, const Tensor& a, double lo = 0.0, double hi = 0.0) {
  check_defined(name_of(op), a);
  DType compute = a.dtype();
  DType result = compute;
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Abs:
      if (a.dtype() == DType::Bool) {
        throw InvalidArgument(fmt::format("{} of a bool{} tensor is not supported (as in PyTorch)", name_of(op),
                                          shape_str(a.shape())));
      }
      if (op == UnaryOp::Abs) result = complex_to_real(a.dtype());
      break;
    case UnaryOp::Sqrt:
    case UnaryOp::Exp:
    case UnaryOp::Log:
      compute = result = detail::floating_result(a.dtype());
      break;
    case UnaryOp::Clamp:
      compute = result = detail::promote_with_scalar(a.dtype());
      if (is_complex(compute)) {
        throw InvalidArgument(fmt::format("clamp of a {}{} tensor: complex numbers are unordered", a.dtype(),
                                          shape_str(a.shape())));
      }
      break;
  }
  Tensor out = Tensor::empty(a.shape(), {result, a.device(), false});
  run_unary(op, out, a.to(compute), lo, hi);
  return out;
}

}  // namespace

Tensor Tensor::add(const Tensor& other) const { return binary(BinaryOp::Add, *this, other); }
Tensor Tensor::add(Scalar other) const { return binary(BinaryOp::Add, *this, other); }
Tensor Tensor::sub(const Tensor& other) const { return binary(BinaryOp::Sub, *this, other); }
Tensor Tensor::sub(Scalar other) const { return binary(BinaryOp::Sub, *this, other); }
Tensor Tensor::mul(const Tensor& other) const { return binary(BinaryOp::Mul, *this, other); }
Tensor Tensor::mul(Scalar other) const { return binary(BinaryOp::Mul, *this, other); }
Tensor Tensor::div(const Tensor& other) const { return binary(BinaryOp::Div, *this, other); }
Tensor Tensor::div(Scalar other) const { return binary(BinaryOp::Div, *this, other); }

const Tensor& Tensor::add_(const Tensor& other) const { return binary_(BinaryOp::Add, *this, other); }
const Tensor& Tensor::add_(Scalar other) const { return binary_(BinaryOp::Add, *this, other); }
const Tensor& Tensor::sub_(const Tensor& other) const { return binary_(BinaryOp::Sub, *this, other); }
const Tensor& Tensor::sub_(Scalar other) const { return binary_(BinaryOp::Sub, *this, other); }
const Tensor& Tensor::mul_(const Tensor& other) const { return binary_(BinaryOp::Mul, *this, other); }
const Tensor& Tensor::mul_(Scalar other) const { return binary_(BinaryOp::Mul, *this, other); }
const Tensor& Tensor::div_(const Tensor& other) const { return binary_(BinaryOp::Div, *this, other); }
const Tensor& Tensor::div_(Scalar other) const { return binary_(BinaryOp::Div, *this, other); }

Tensor Tensor::neg() const { return unary(UnaryOp::Neg, *this); }
Tensor Tensor::abs() const { return unary(UnaryOp::Abs, *this); }
Tensor Tensor::sqrt() const { return unary(UnaryOp::Sqrt, *this); }
Tensor Tensor::exp() const { return unary(UnaryOp::Exp, *this); }
Tensor Tensor::log() const { return unary(UnaryOp::Log, *this); }

Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  if (!min && !max) {
    throw InvalidArgument(fmt::format("clamp of a {}{} tensor: give at least one of min and max", dtype_,
                                      shape_str(shape_)));
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return unary(UnaryOp::Clamp, *this, min.value_or(-kInf), max.value_or(kInf));
}

Tensor Tensor::eq(const Tensor& other) const { return binary(BinaryOp::Eq, *this, other); }
Tensor Tensor::eq(Scalar other) const { return binary(BinaryOp::Eq, *this, other); }
Tensor Tensor::ne(const Tensor& other) const { return binary(BinaryOp::Ne, *this, other); }
Tensor Tensor::ne(Scalar other) const { return binary(BinaryOp::Ne, *this, other); }
Tensor Tensor::lt(const Tensor& other) const { return binary(BinaryOp::Lt, *this, other); }
Tensor Tensor::lt(Scalar other) const { return binary(BinaryOp::Lt, *this, other); }
Tensor Tensor::le(const Tensor& other) const { return binary(BinaryOp::Le, *this, other); }
Tensor Tensor::le(Scalar other) const { return binary(BinaryOp::Le, *this, other); }
Tensor Tensor::gt(const Tensor& other) const { return binary(BinaryOp::Gt, *this, other); }
Tensor Tensor::gt(Scalar other) const { return binary(BinaryOp::Gt, *this, other); }
Tensor Tensor::ge(const Tensor& other) const { return binary(BinaryOp::Ge, *this, other); }
Tensor Tensor::ge(Scalar other) const { return binary(BinaryOp::Ge, *this, other); }

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator+(const Tensor& a, Scalar b) { return a.add(b); }
Tensor operator+(Scalar a, const Tensor& b) { return b.add(a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator-(const Tensor& a, Scalar b) { return a.sub(b); }
Tensor operator-(Scalar a, const Tensor& b) { return binary(BinaryOp::Sub, b, a, true); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator*(const Tensor& a, Scalar b) { return a.mul(b); }
Tensor operator*(Scalar a, const Tensor& b) { return b.mul(a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator/(const Tensor& a, Scalar b) { return a.div(b); }
Tensor operator/(Scalar a, const Tensor& b) { return binary(BinaryOp::Div, b, a, true); }
Tensor operator-(const Tensor& a) { return a.neg(); }

const Tensor& operator+=(const Tensor& a, const Tensor& b) { return a.add_(b); }
const Tensor& operator+=(const Tensor& a, Scalar b) { return a.add_(b); }
const Tensor& operator-=(const Tensor& a, const Tensor& b) { return a.sub_(b); }
const Tensor& operator-=(const Tensor& a, Scalar b) { return a.sub_(b); }
const Tensor& operator*=(const Tensor& a, const Tensor& b) { return a.mul_(b); }
const Tensor& operator*=(const Tensor& a, Scalar b) { return a.mul_(b); }
const Tensor& operator/=(const Tensor& a, const Tensor& b) { return a.div_(b); }
const Tensor& operator/=(const Tensor& a, Scalar b) { return a.div_(b); }

Tensor operator==(const Tensor& a, const Tensor& b) { return a.eq(b); }
Tensor operator==(const Tensor& a, Scalar b) { return a.eq(b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return a.ne(b); }
Tensor operator!=(const Tensor& a, Scalar b) { return a.ne(b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<(const Tensor& a, Scalar b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator<=(const Tensor& a, Scalar b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>(const Tensor& a, Scalar b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
Tensor operator>=(const Tensor& a, Scalar b) { return a.ge(b); }

}  // namespace tensortree
