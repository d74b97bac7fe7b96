// Tensor: a strided view (byte offset, shape, strides in elements) of a shared Storage.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <span>
#include <string>

#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"
#include "tensortree/export.hpp"
#include "tensortree/scalar.hpp"
#include "tensortree/shape.hpp"
#include "tensortree/slice.hpp"
#include "tensortree/storage.hpp"

namespace tensortree {

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool pinned = false;  // page-locked host memory (CPU tensors only)
};

namespace detail {
struct TensorAccess;
}

class TT_API Tensor {
 public:
  // An undefined tensor (no storage); most operations on it throw InvalidArgument.
  Tensor() = default;
  Tensor(StoragePtr storage, std::size_t byte_offset, DType dtype, Shape shape, Strides strides);

  // ---- factories --------------------------------------------------------------------------
  static Tensor empty(Shape shape, TensorOptions options = {});
  static Tensor zeros(Shape shape, TensorOptions options = {});
  static Tensor full(Shape shape, double value, TensorOptions options = {});
  // Element i (in C order) holds start + i * step, converted to the dtype: handy non-zero test data.
  static Tensor arange(Shape shape, double start = 1.0, double step = 1.0, TensorOptions options = {});
  // Views foreign memory; `deleter(data)` runs once when the last view is gone. Empty `strides`
  // means C-contiguous; cuda() (no index) means the current device. If from_blob throws, the
  // deleter has not run and the caller still owns `data`.
  static Tensor from_blob(void* data, Shape shape, DType dtype, Device device,
                          Storage::Deleter deleter, Strides strides = {});

  // ---- properties -------------------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const;
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t size(std::int64_t dim) const;
  std::int64_t numel() const;  // 0 for an undefined tensor
  std::size_t itemsize() const { return tensortree::itemsize(dtype_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * itemsize(); }
  std::size_t byte_offset() const { return byte_offset_; }
  const StoragePtr& storage() const { return storage_; }
  bool is_contiguous() const;

  // Address of element 0 (the view's start, not the storage's).
  void* data_ptr() const;
  // Typed pointer; InvalidArgument if T is not this tensor's element type.
  template <class T>
  T* data() const {
    check_element_type(dtype_v<T>);
    return static_cast<T*>(data_ptr());
  }

  // ---- element access (CPU tensors) --------------------------------------------------------
  template <class T>
  T& at(std::initializer_list<std::int64_t> index) const {
    check_element_type(dtype_v<T>);
    return *reinterpret_cast<T*>(element_address(index));
  }
  // Any element as a complex<double> (real part for real dtypes, 0/1 for bool); CPU only.
  std::complex<double> value_at_linear(std::int64_t linear_index) const;

  // ---- views (no copy) ---------------------------------------------------------------------
  // Elements start, start+step, ... below stop along `dim`; start/stop clamp like Python's slices
  // and may be negative; step must be positive. t.slice(0, {2, 8, 2}) (slice.hpp).
  Tensor slice(std::int64_t dim, const Slice& range) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  // Removes `dim`, keeping index `index` (negative counts from the end).
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor permute(std::initializer_list<std::int64_t> dims) const;
  // Same elements, new shape; one dimension may be -1. view() needs a contiguous tensor,
  // reshape() copies when it must.
  Tensor view(Shape shape) const;
  Tensor reshape(Shape shape) const;
  // A contiguous tensor's bytes as a 1-D uint8 tensor over the same storage (what moves them as
  // raw bytes, whatever the dtype). InvalidArgument for a tensor that is not contiguous.
  Tensor byte_view() const;
  // Inserts a dimension of size 1 at `dim` (0..dim(); negative counts from the end, -1 appends).
  Tensor unsqueeze(std::int64_t dim) const;

  // ---- gathering and joining (new tensors) ------------------------------------------------
  // Rows `index[i]` (an int64 or int32 1-D CPU tensor; negative counts from the end) along `dim`,
  // in a new contiguous tensor on this tensor's device.
  Tensor index_select(std::int64_t dim, const Tensor& index) const;
  // Joins tensors of one shape along a new dimension / tensors that differ only in `dim`. All must
  // share dtype and device; InvalidArgument names the first tensor that does not fit.
  static Tensor stack(std::span<const Tensor> tensors, std::int64_t dim = 0);
  static Tensor cat(std::span<const Tensor> tensors, std::int64_t dim = 0);
  // Tensor::cat({a, b}): std::span has no initializer-list constructor before C++26.
  static Tensor stack(std::initializer_list<Tensor> tensors, std::int64_t dim = 0);
  static Tensor cat(std::initializer_list<Tensor> tensors, std::int64_t dim = 0);

  // ---- copies ------------------------------------------------------------------------------
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;       // always a fresh, contiguous buffer on the same device
  // Copies to another device; returns itself when already there. NotSupported when no CUDA device
  // can be used (none present, or a build without CUDA).
  Tensor to(Device device) const;
  // Writes src's elements into this view (shapes must match; dtypes must match; any devices). A copy
  // between two CUDA tensors returns once it is queued on the current stream (cudaMemcpy's
  // semantics); later library work is ordered after it, and a copy to the host waits for it.
  void copy_(const Tensor& src) const;
  void fill_(double value) const;

  // ---- comparison and printing --------------------------------------------------------------
  // Same shape, dtype and element values (NaN never equals, as in torch.equal); CPU or CUDA.
  bool equal(const Tensor& other) const;
  // PyTorch's repr: "tensor([1., 2., 3.])", "tensor([1, 2], dtype=torch.int32, device='cuda:0')".
  std::string str() const;

  // ---- TensorDict API helpers (tensor_view.cpp, tensor_where.cpp, tensor_compare.cpp,
  // tensor_reduce.cpp). CUDA tensors go through host memory where noted: these serve tree methods
  // on learner-sized batches, not kernels.
  // Removes `dim` when its size is 1 and is a no-op otherwise, as torch.squeeze(dim) is;
  // squeeze() removes every dimension of size 1.
  Tensor squeeze(std::int64_t dim) const;
  Tensor squeeze() const;
  // PyTorch's expand: a view of `shape` (new dimensions in front; -1 keeps a size) in which
  // dimensions of size 1 are stretched with stride 0. InvalidArgument when a size is neither
  // equal nor 1.
  Tensor expand(Shape shape) const;
  // A view of `shape` over the same storage when the strides allow one (PyTorch's view rule, which
  // also views many non-contiguous tensors), nullopt otherwise. view() throws where this is nullopt;
  // reshape() copies there.
  std::optional<Tensor> try_view(Shape shape) const;
  // permute() with the order known only at run time.
  Tensor permute(std::span<const std::int64_t> dims) const;
  // Elements of `a` where `cond` (bool) is true, of `b` elsewhere; the three broadcast together
  // (NumPy's rule), `a` and `b` share a dtype and a device (cond may be on the CPU). CPU, or CUDA
  // through host memory.
  static Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
  // Writes `value` where `mask` (bool, broadcastable to this shape) is true. CPU, or CUDA through
  // host memory.
  void masked_fill_(const Tensor& mask, double value) const;
  // torch.allclose: |a - b| <= atol + rtol * |b| element-wise after broadcasting; NaN is never
  // close, infinities only to themselves; dtypes must match (InvalidArgument).
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8) const;
  // Reductions over one dimension, as torch.sum/mean/amin/amax(dim, keepdim). sum of bool or
  // integer elements is int64 (as in PyTorch); floating and complex sums keep the dtype,
  // accumulated in double. mean needs a floating or complex dtype; amin/amax an empty-free
  // dimension and a real dtype (NaN propagates). CPU, or CUDA through host memory.
  Tensor sum(std::int64_t dim, bool keepdim = false) const;
  Tensor mean(std::int64_t dim, bool keepdim = false) const;
  Tensor amin(std::int64_t dim, bool keepdim = false) const;
  Tensor amax(std::int64_t dim, bool keepdim = false) const;

  // ---- element-wise arithmetic (tensor_arith.cpp, tensor_cast.cpp), as PyTorch's ---------------
  // Operands broadcast (NumPy's rule) and compute in promote_types(a, b) (dtype.hpp); a scalar
  // follows PyTorch's rules for Python numbers (scalar.hpp): an integer keeps an integer tensor's
  // dtype (bool becomes int64), a floating value turns a bool or integer tensor into float32, and a
  // floating tensor keeps its dtype. float16,
  // bfloat16 and float8 compute in float. Integers wrap on overflow. Both tensors must be on one
  // device. InvalidArgument / NotSupported name the operation, the shapes and the dtypes.
  Tensor add(const Tensor& other) const;
  Tensor add(Scalar other) const;
  Tensor sub(const Tensor& other) const;
  Tensor sub(Scalar other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  // True division: bool and integer operands give float32.
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  // In place: the broadcast shape must be this tensor's, and the result dtype must cast back to
  // this tensor's (can_cast: an int64 tensor refuses += 0.5 or += a float tensor).
  const Tensor& add_(const Tensor& other) const;
  const Tensor& add_(Scalar other) const;
  const Tensor& sub_(const Tensor& other) const;
  const Tensor& sub_(Scalar other) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(Scalar other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(Scalar other) const;
  // neg and abs keep the dtype (abs of complex gives its real dtype; neither takes bool); sqrt, exp
  // and log give float32 for bool and integer inputs.
  Tensor neg() const;
  Tensor abs() const;
  Tensor sqrt() const;
  Tensor exp() const;
  Tensor log() const;
  // min(max(x, min), max) with either bound optional (at least one given); the dtype is as for
  // a scalar operand. NaN stays NaN. Not for complex.
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  // Element-wise comparisons in the promoted dtype, giving bool tensors. lt/le/gt/ge refuse
  // complex operands.
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;
  // A copy converted to `dtype` (itself when it already has it), as PyTorch's tensor.to(dtype):
  // floating to integer truncates toward zero, complex to real keeps the real part, anything to
  // bool tests for non-zero. The named forms are PyTorch's float(), double(), half(), bfloat16(),
  // int(), long(), bool() (C++ keywords get a to_ prefix).
  Tensor to(DType dtype) const;
  Tensor to_float() const { return to(DType::Float32); }
  Tensor to_double() const { return to(DType::Float64); }
  Tensor half() const { return to(DType::Float16); }
  Tensor bfloat16() const { return to(DType::BFloat16); }
  Tensor to_int() const { return to(DType::Int32); }
  Tensor to_long() const { return to(DType::Int64); }
  Tensor to_bool() const { return to(DType::Bool); }

 private:
  friend struct detail::TensorAccess;

  void check_defined(const char* what) const;
  void check_element_type(DType requested) const;
  std::byte* element_address(std::initializer_list<std::int64_t> index) const;
  std::int64_t wrap_dim(std::int64_t dim) const;

  StoragePtr storage_;
  std::size_t byte_offset_ = 0;
  DType dtype_ = DType::Float32;
  Shape shape_;
  Strides strides_;
};

TT_API std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// Operators for the element-wise methods above; a scalar may stand on either side. Comparisons
// give bool tensors, as in PyTorch (Tensor::equal is the whole-tensor test).
TT_API Tensor operator+(const Tensor& a, const Tensor& b);
TT_API Tensor operator+(const Tensor& a, Scalar b);
TT_API Tensor operator+(Scalar a, const Tensor& b);
TT_API Tensor operator-(const Tensor& a, const Tensor& b);
TT_API Tensor operator-(const Tensor& a, Scalar b);
TT_API Tensor operator-(Scalar a, const Tensor& b);
TT_API Tensor operator*(const Tensor& a, const Tensor& b);
TT_API Tensor operator*(const Tensor& a, Scalar b);
TT_API Tensor operator*(Scalar a, const Tensor& b);
TT_API Tensor operator/(const Tensor& a, const Tensor& b);
TT_API Tensor operator/(const Tensor& a, Scalar b);
TT_API Tensor operator/(Scalar a, const Tensor& b);
TT_API Tensor operator-(const Tensor& a);
// In place, as add_ and the others (the tensor's elements change; the handle is a view).
TT_API const Tensor& operator+=(const Tensor& a, const Tensor& b);
TT_API const Tensor& operator+=(const Tensor& a, Scalar b);
TT_API const Tensor& operator-=(const Tensor& a, const Tensor& b);
TT_API const Tensor& operator-=(const Tensor& a, Scalar b);
TT_API const Tensor& operator*=(const Tensor& a, const Tensor& b);
TT_API const Tensor& operator*=(const Tensor& a, Scalar b);
TT_API const Tensor& operator/=(const Tensor& a, const Tensor& b);
TT_API const Tensor& operator/=(const Tensor& a, Scalar b);
TT_API Tensor operator==(const Tensor& a, const Tensor& b);
TT_API Tensor operator==(const Tensor& a, Scalar b);
TT_API Tensor operator!=(const Tensor& a, const Tensor& b);
TT_API Tensor operator!=(const Tensor& a, Scalar b);
TT_API Tensor operator<(const Tensor& a, const Tensor& b);
TT_API Tensor operator<(const Tensor& a, Scalar b);
TT_API Tensor operator<=(const Tensor& a, const Tensor& b);
TT_API Tensor operator<=(const Tensor& a, Scalar b);
TT_API Tensor operator>(const Tensor& a, const Tensor& b);
TT_API Tensor operator>(const Tensor& a, Scalar b);
TT_API Tensor operator>=(const Tensor& a, const Tensor& b);
TT_API Tensor operator>=(const Tensor& a, Scalar b);

}  // namespace tensortree
