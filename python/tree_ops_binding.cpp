#include "tree_ops_binding.hpp"

#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "tensor_binding.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree_operators.hpp"
#include "tree_binding.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// Python's start:stop:step as the library's Slice; a negative step has no view in torch either.
Slice slice_from(const py::slice& range) {
  const auto bound = [](const py::object& value) { return value.is_none() ? std::nullopt : std::optional<std::int64_t>(value.cast<std::int64_t>()); };
  const std::optional<std::int64_t> step = bound(range.attr("step"));
  if (step && *step <= 0) throw InvalidArgument("batch slice: the step must be positive (torch has no negative steps)");
  return Slice{bound(range.attr("start")).value_or(0), bound(range.attr("stop")), step.value_or(1)};
}

// Row `row` of batch dimension `dim`, which the result loses (negative counts from the end).
TensorTree select_row(const TensorTree& tree, std::int64_t dim, std::int64_t row) {
  if (dim == 0) return tree.index(row);
  if (dim >= tree.batch_dims()) throw InvalidArgument("batch index: more entries than batch dimensions");
  const std::int64_t size = tree.batch_size()[static_cast<std::size_t>(dim)];
  const std::int64_t position = row < 0 ? row + size : row;
  if (position < 0 || position >= size) {
    throw InvalidArgument("batch index " + std::to_string(row) + " is out of range for batch dimension " +
                          std::to_string(dim) + " of size " + std::to_string(size));
  }
  return tree.slice(dim, Slice{position, position + 1}).squeeze(dim);
}

// A tuple of ints and slices indexes one batch dimension after another; an int removes its
// dimension, so the next entry applies to the same position.
TensorTree index_dimensions(const TensorTree& tree, const py::tuple& index) {
  TensorTree result = tree;
  std::int64_t dim = 0;
  for (const py::handle entry : index) {
    if (py::isinstance<py::int_>(entry)) {
      result = select_row(result, dim, entry.cast<std::int64_t>());
    } else if (py::isinstance<py::slice>(entry)) {
      result = result.slice(dim++, slice_from(entry.cast<py::slice>()));
    } else {
      throw InvalidArgument("a tuple batch index holds ints and slices; index with a tensor on its own");
    }
  }
  return result;
}

Scalar scalar_from(const py::handle& value) {
  if (py::isinstance<py::bool_>(value) || py::isinstance<py::int_>(value)) return Scalar(value.cast<std::int64_t>());
  return Scalar(value.cast<double>());
}

std::vector<TensorTree> trees_from(const py::iterable& trees) {
  std::vector<TensorTree> out;
  for (const py::handle tree : trees) out.push_back(tree.cast<TensorTree>());
  return out;
}

// The tree's leaves as torch tensors (no copy) in a tensordict.TensorDict.
py::object to_tensordict(const TensorTree& tree) {
  const py::object tensordict_class = py::module_::import("tensordict").attr("TensorDict");
  return tensordict_class(tree_to_dict(tree), py::arg("batch_size") = py::cast(std::vector<std::int64_t>(
                                                  tree.batch_size().begin(), tree.batch_size().end())));
}

TensorTree from_tensordict(const py::object& tensordict) {
  const py::object batch_size = py::list(tensordict.attr("batch_size"));
  return tree_from_python(tensordict.attr("to_dict")(), batch_size);
}

// Binds `op(tree, tree)`, `op(tree, scalar)` and the reflected `op(scalar, tree)` under `name`.
template <class Binary>
void bind_binary(py::class_<TensorTree>& tree_class, const char* name, const char* reflected, Binary op) {
  tree_class.def(name, [op](const TensorTree& a, const TensorTree& b) { return op(a, b); }, py::is_operator());
  tree_class.def(name, [op](const TensorTree& a, const py::object& b) { return op(a, scalar_from(b)); },
                 py::is_operator());
  tree_class.def(reflected, [op](const TensorTree& b, const py::object& a) { return op(scalar_from(a), b); },
                 py::is_operator());
}

// Binds the in-place `op(tree, tree)` and `op(tree, scalar)` under `name` (returns the tree).
template <class InPlace>
void bind_in_place(py::class_<TensorTree>& tree_class, const char* name, InPlace op) {
  tree_class.def(name, [op](TensorTree& a, const TensorTree& b) -> TensorTree& { op(a, b); return a; },
                 py::is_operator(), py::return_value_policy::reference_internal);
  tree_class.def(name, [op](TensorTree& a, const py::object& b) -> TensorTree& { op(a, scalar_from(b)); return a; },
                 py::is_operator(), py::return_value_policy::reference_internal);
}

void bind_arithmetic(py::class_<TensorTree>& tree_class) {
  bind_binary(tree_class, "__add__", "__radd__", [](const auto& a, const auto& b) { return a + b; });
  bind_binary(tree_class, "__sub__", "__rsub__", [](const auto& a, const auto& b) { return a - b; });
  bind_binary(tree_class, "__mul__", "__rmul__", [](const auto& a, const auto& b) { return a * b; });
  bind_binary(tree_class, "__truediv__", "__rtruediv__", [](const auto& a, const auto& b) { return a / b; });
  bind_in_place(tree_class, "__iadd__", [](const TensorTree& a, const auto& b) { a += b; });
  bind_in_place(tree_class, "__isub__", [](const TensorTree& a, const auto& b) { a -= b; });
  bind_in_place(tree_class, "__imul__", [](const TensorTree& a, const auto& b) { a *= b; });
  bind_in_place(tree_class, "__itruediv__", [](const TensorTree& a, const auto& b) { a /= b; });
  tree_class.def("__neg__", [](const TensorTree& a) { return -a; });
}

}  // namespace

TensorTree batch_index(const TensorTree& tree, const py::handle& index) {
  if (py::isinstance<py::int_>(index)) return tree.index(index.cast<std::int64_t>());
  if (py::isinstance<py::slice>(index)) return tree.slice(0, slice_from(index.cast<py::slice>()));
  if (py::isinstance<py::tuple>(index)) return index_dimensions(tree, index.cast<py::tuple>());
  if (py::isinstance<py::list>(index)) {
    const auto rows = index.cast<std::vector<std::int64_t>>();
    Tensor row_tensor = Tensor::empty({static_cast<std::int64_t>(rows.size())}, {DType::Int64});
    std::copy(rows.begin(), rows.end(), row_tensor.data<std::int64_t>());
    return tree.index(row_tensor);
  }
  return tree.index(tensor_from_python(index));
}

void bind_tree_ops(py::class_<TensorTree>& tree_class, py::module_& module) {
  bind_arithmetic(tree_class);
  tree_class
      .def("apply",
           [](const TensorTree& tree, const py::function& fn) {
             return tree.apply([&fn](const Tensor& leaf) { return tensor_from_python(fn(to_torch(leaf))); });
           },
           py::arg("fn"),
           "A tree of the same keys holding fn(leaf) for every leaf, given and returning torch tensors "
           "(TensorDict's apply); each result keeps the batch_size.")
      .def("to_tensordict", &to_tensordict, "A tensordict.TensorDict viewing the same memory (needs tensordict).")
      .def_static("from_tensordict", &from_tensordict, py::arg("tensordict"),
                  "A tree viewing a tensordict.TensorDict's tensors (no copy).")
      .def("unbind", &TensorTree::unbind, py::arg("dim") = 0)
      .def("split", py::overload_cast<std::int64_t, std::int64_t>(&TensorTree::split, py::const_), py::arg("size"),
           py::arg("dim") = 0)
      .def("reshape", [](const TensorTree& tree, const std::vector<std::int64_t>& batch_size) {
        return tree.reshape(Shape(batch_size.begin(), batch_size.end()));
      })
      .def("equal", &TensorTree::equal, py::arg("other"), "Same keys and batch sizes, leaves equal element by element.")
      .def("allclose", &TensorTree::allclose, py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8)
      .def("zero_", [](TensorTree& tree) -> TensorTree& { tree.zero_(); return tree; },
           py::return_value_policy::reference_internal)
      .def("fill_", [](TensorTree& tree, double value) -> TensorTree& { tree.fill_(value); return tree; },
           py::arg("value"), py::return_value_policy::reference_internal);
  module.def("stack", [](const py::iterable& trees, std::int64_t dim) { return TensorTree::stack(trees_from(trees), dim); },
             py::arg("trees"), py::arg("dim") = 0, "torch.stack for trees of one structure: a new batch dimension.");
  module.def("cat", [](const py::iterable& trees, std::int64_t dim) { return TensorTree::cat(trees_from(trees), dim); },
             py::arg("trees"), py::arg("dim") = 0, "torch.cat for trees of one structure, along a batch dimension.");
}

}  // namespace tensortree::python
