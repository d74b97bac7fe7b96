// tensortree.TensorTree in Python: built from nested dicts of torch tensors or NumPy arrays (no
// copy), indexed by key, tuple path or dotted path, and given back as nested dicts of torch tensors
// viewing the same memory (to_dict).
#pragma once

#include <pybind11/pybind11.h>

#include "tensortree/tree.hpp"

namespace tensortree::python {

void bind_tree(pybind11::module_& module);

// A tree from Python: a TensorTree as it is, or a nested dict of arrays viewed without a copy, of
// batch size `batch_size` (a sequence of ints); None takes the first leaf's first dimension, as a
// trajectory of T steps has batch size [T].
TensorTree tree_from_python(const pybind11::handle& source, const pybind11::handle& batch_size);

// Parameters from Python: a TensorTree as it is, a nested dict as a tree of batch size [].
TensorTree params_from_python(const pybind11::handle& source);

// Nested dicts of torch tensors viewing `tree`'s memory.
pybind11::dict tree_to_dict(const TensorTree& tree);

}  // namespace tensortree::python
