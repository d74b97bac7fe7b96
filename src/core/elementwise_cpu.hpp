// The CPU loops under the element-wise operations: out[i] = fn(a[i]) and out[i] = fn(a[i], b[i])
// over tensors of one shape (inputs already broadcast, as stride-0 views). Contiguous operands run
// a plain indexed loop the compiler vectorises; others go through for_each_offset. Above 1 MiB the
// work is split across oneTBB's threads (flat ranges, or slices of dimension 0).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/tensor_iter.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// body(begin, end) over [0, n); split across threads when the work touches `bytes` >= 1 MiB. Not a
// template: oneTBB's parallel_for is instantiated once (elementwise_cpu.cpp), not per loop.
using RangeBody = std::function<void(std::int64_t, std::int64_t)>;
void parallel_range(std::int64_t n, std::int64_t bytes, const RangeBody& body);

// loop(views) over the whole of `views` (all of views[0]'s shape), or over slices of dimension 0
// run in parallel.
template <std::size_t N>
using ViewsBody = std::function<void(const std::array<Tensor, N>&)>;
void split_rows(const std::array<Tensor, 2>& views, std::int64_t bytes, const ViewsBody<2>& loop);
void split_rows(const std::array<Tensor, 3>& views, std::int64_t bytes, const ViewsBody<3>& loop);

template <class T>
T* elements(const Tensor& tensor) {
  return static_cast<T*>(tensor.data_ptr());
}

// out[i] = fn(a[i]); Out and A are storage types.
template <class Out, class A, class Fn>
void map_elements(const Tensor& out, const Tensor& a, const Fn& fn) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(Out) + sizeof(A));
  if (out.is_contiguous() && a.is_contiguous()) {
    Out* po = elements<Out>(out);
    const A* pa = elements<const A>(a);
    parallel_range(n, bytes, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) po[i] = fn(pa[i]);
    });
    return;
  }
  split_rows({out, a}, bytes, [&](const std::array<Tensor, 2>& v) {
    Out* po = elements<Out>(v[0]);
    const A* pa = elements<const A>(v[1]);
    const std::array<Strides, 2> strides{v[0].strides(), v[1].strides()};
    for_each_offset(v[0].shape(), strides, [&](const std::array<std::int64_t, 2>& at) { po[at[0]] = fn(pa[at[1]]); });
  });
}

// out[i] = fn(a[i], b[i]); Out, A and B are storage types.
template <class Out, class A, class B, class Fn>
void map_elements(const Tensor& out, const Tensor& a, const Tensor& b, const Fn& fn) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(Out) + sizeof(A) + sizeof(B));
  if (out.is_contiguous() && a.is_contiguous() && b.is_contiguous()) {
    Out* po = elements<Out>(out);
    const A* pa = elements<const A>(a);
    const B* pb = elements<const B>(b);
    parallel_range(n, bytes, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) po[i] = fn(pa[i], pb[i]);
    });
    return;
  }
  split_rows({out, a, b}, bytes, [&](const std::array<Tensor, 3>& v) {
    Out* po = elements<Out>(v[0]);
    const A* pa = elements<const A>(v[1]);
    const B* pb = elements<const B>(v[2]);
    const std::array<Strides, 3> strides{v[0].strides(), v[1].strides(), v[2].strides()};
    for_each_offset(v[0].shape(), strides,
                    [&](const std::array<std::int64_t, 3>& at) { po[at[0]] = fn(pa[at[1]], pb[at[2]]); });
  });
}

}  // namespace tensortree::detail
