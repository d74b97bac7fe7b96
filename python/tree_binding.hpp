// tensortree.TensorTree in Python: built from nested dicts of torch tensors or NumPy arrays (no
// copy), indexed by key, tuple path or dotted path, and given back as nested dicts of torch tensors
// viewing the same memory (to_dict).
#pragma once

#include <pybind11/pybind11.h>

namespace tensortree::python {

void bind_tree(pybind11::module_& module);

}  // namespace tensortree::python
