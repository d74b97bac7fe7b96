// Tensor::to(DType): element conversion as PyTorch's tensor.to(dtype) (element_types.hpp's
// convert_value), in the element-wise loops of elementwise_cpu.hpp or one CUDA kernel.
#include "core/cuda_api.hpp"
#include "core/element_types.hpp"
#include "core/elementwise_cpu.hpp"
#include "core/strided_copy.hpp"
#include "core/type_promotion.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

namespace {

void convert_cpu(const Tensor& out, const Tensor& in) {
  visit_dtype(out.dtype(), [&](auto to_tag) {
    using To = detail::ElementType<decltype(to_tag)>;
    visit_dtype(in.dtype(), [&](auto from_tag) {
      using From = detail::ElementType<decltype(from_tag)>;
      detail::map_elements<typename To::storage, typename From::storage>(out, in, [](typename From::storage x) {
        return To::store(detail::convert_value<typename To::compute>(From::load(x)));
      });
    });
  });
}

}  // namespace

Tensor Tensor::to(DType dtype) const {
  check_defined("to");
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, {dtype, device(), false});
  if (device().is_cpu()) {
    convert_cpu(out, *this);
  } else if (detail::kernel_computes(dtype) && detail::kernel_computes(dtype_)) {
    cuda::convert(detail::strided_view_of(out), dtype, detail::strided_view_of(*this), dtype_, device().index());
  } else {
    // The CUDA kernels convert real dtypes only: complex and float8 go through host memory.
    const Tensor host = Tensor::empty(shape_, {dtype, Device::cpu(), false});
    convert_cpu(host, to(Device::cpu()));
    out.copy_(host);
  }
  return out;
}

}  // namespace tensortree
