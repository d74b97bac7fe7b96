// TensorDict's operations on tensortree.TensorTree in Python: batch indexing (an int, a slice, an
// index or mask tensor, a tuple of ints and slices), stack and cat, apply with a Python function,
// arithmetic with trees and scalars, and to_tensordict / from_tensordict where tensordict is
// importable.
#pragma once

#include <pybind11/pybind11.h>

#include "tensortree/tree.hpp"

namespace tensortree::python {

void bind_tree_ops(pybind11::class_<TensorTree>& tree_class, pybind11::module_& module);

// tree[index] for a batch index: an int, a slice, a tuple of ints and slices, a list of ints, or an
// integer or bool tensor (anything with __dlpack__).
TensorTree batch_index(const TensorTree& tree, const pybind11::handle& index);

}  // namespace tensortree::python
