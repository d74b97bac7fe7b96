// tensortree.Tensor in Python, and the zero-copy exchange with PyTorch, NumPy and CuPy through
// DLPack: Tensor.__dlpack__ / __dlpack_device__ for consumers (torch.from_dlpack, numpy.from_dlpack)
// and tensortree.from_dlpack for producers. Either side may outlive the other; the memory is freed
// once, when the last of them lets go.
#pragma once

#include <pybind11/pybind11.h>

#include "tensortree/tensor.hpp"

namespace tensortree::python {

void bind_tensor(pybind11::module_& module);

// A tensortree Tensor viewing `source`'s memory: a tensortree.Tensor itself, or anything with
// __dlpack__ (a torch tensor, a NumPy array), or a DLPack capsule. No copy.
Tensor tensor_from_python(const pybind11::handle& source);

// A torch tensor viewing `tensor`'s memory (torch.from_dlpack); ImportError without torch.
pybind11::object to_torch(const Tensor& tensor);

}  // namespace tensortree::python
