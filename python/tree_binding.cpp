#include "tree_binding.hpp"

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tensor_binding.hpp"
#include "tensortree/error.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/tree.hpp"
#include "tree_ops_binding.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

Shape shape_from(const py::handle& sizes) {
  if (py::isinstance<py::int_>(sizes)) return Shape{sizes.cast<std::int64_t>()};
  Shape shape;
  for (const py::handle size : sizes) shape.push_back(size.cast<std::int64_t>());
  return shape;
}

// A string or a tuple of strings names an entry; anything else indexes the batch.
bool is_key(const py::handle& key) {
  if (py::isinstance<py::str>(key)) return true;
  if (!py::isinstance<py::tuple>(key) || py::len(key) == 0) return false;
  for (const py::handle part : key) {
    if (!py::isinstance<py::str>(part)) return false;
  }
  return true;
}

// A key as Python names it: "obs", "next.obs" or ("next", "obs").
Path path_from(const py::handle& key) {
  if (py::isinstance<py::str>(key)) return parse_path(key.cast<std::string>());
  if (py::isinstance<py::tuple>(key)) {
    Path path;
    for (const py::handle part : key) {
      if (!py::isinstance<py::str>(part)) throw InvalidArgument("a tuple key holds strings only");
      path.push_back(part.cast<std::string>());
    }
    return path;
  }
  throw InvalidArgument("a key is a string ('next.obs') or a tuple of strings (('next', 'obs'))");
}

void fill(TensorTree& tree, const py::dict& source);

// `value` at `path`: a tree as it is, a nested dict as a sub-tree of the same batch size
// (TensorDict's rule), anything else as a leaf viewing its memory.
void set_entry(TensorTree& tree, const Path& path, const py::handle& value) {
  if (py::isinstance<TensorTree>(value)) {
    tree.set(path, value.cast<TensorTree>());
  } else if (py::isinstance<py::dict>(value)) {
    TensorTree child(tree.batch_size());
    fill(child, value.cast<py::dict>());
    tree.set(path, std::move(child));
  } else {
    tree.set(path, tensor_from_python(value));
  }
}

void fill(TensorTree& tree, const py::dict& source) {
  for (const auto& [key, value] : source) {
    if (!py::isinstance<py::str>(key)) throw InvalidArgument("the keys of a tree's dict are strings");
    set_entry(tree, Path{key.cast<std::string>()}, value);
  }
}

// The first dimension of the first leaf in `source` (a nested dict), the batch size a trajectory of
// T steps has; InvalidArgument when there is no leaf or it has no dimension.
Shape leading_dimension(const py::dict& source) {
  for (const auto& [key, value] : source) {
    if (py::isinstance<py::dict>(value)) return leading_dimension(value.cast<py::dict>());
    const Tensor leaf = tensor_from_python(value);
    if (leaf.dim() == 0) break;
    return Shape{leaf.size(0)};
  }
  throw InvalidArgument("a dict without batch_size needs a first leaf with a dimension, its batch size; pass "
                        "batch_size=[...]");
}

// A nested key as TensorDict gives it: a string at the top, a tuple below.
py::object key_object(const Path& path) {
  if (path.size() == 1) return py::str(path.front());
  return py::tuple(py::cast(path));
}

// A missing key is Python's KeyError (as in a dict and in TensorDict), with the library's message,
// which lists the keys there are.
py::object entry_at(const TensorTree& tree, const py::handle& key) {
  if (!is_key(key)) return py::cast(batch_index(tree, key));
  const Path path = path_from(key);
  try {
    if (tree.is_leaf(path)) return py::cast(tree.get(path));
    return py::cast(tree.subtree(path));
  } catch (const InvalidArgument& missing) {
    if (tree.contains(path)) throw;
    throw py::key_error(missing.what());
  }
}

// The dict levels of `nested` copied, the tensors shared: the caller may change its dict.
py::dict copy_levels(const py::dict& nested) {
  py::dict out;
  for (const auto& [key, value] : nested) {
    out[key] = py::isinstance<py::dict>(value) ? py::object(copy_levels(value.cast<py::dict>()))
                                               : py::reinterpret_borrow<py::object>(value);
  }
  return out;
}

// to_dict: a torch tensor costs microseconds to make (torch 1.13), so the views are kept on the
// Python object with the structure version they were made for, which changes with any entry set,
// erased or rebound anywhere in the tree (in-place writes keep it, and the views stay right).
py::dict cached_to_dict(const py::object& self) {
  const auto& tree = self.cast<const TensorTree&>();
  static const auto* const cache_name = new py::str("_torch_views");
  const py::object cached = py::getattr(self, *cache_name, py::none());
  if (!cached.is_none() && cached[py::int_(0)].cast<std::uint64_t>() == tree.structure_version()) {
    return copy_levels(cached[py::int_(1)].cast<py::dict>());
  }
  const py::dict views = tree_to_dict(tree);
  self.attr(*cache_name) = py::make_tuple(tree.structure_version(), views);
  return copy_levels(views);
}

}  // namespace

TensorTree tree_from_python(const py::handle& source, const py::handle& batch_size) {
  if (py::isinstance<TensorTree>(source)) return source.cast<TensorTree>();
  if (!source.is_none() && !py::isinstance<py::dict>(source)) {
    throw InvalidArgument("a tree is a tensortree.TensorTree or a dict of arrays, not a " +
                          std::string(py::str(py::type::of(source).attr("__name__"))));
  }
  const bool infer = batch_size.is_none() && !source.is_none();
  TensorTree tree(infer ? leading_dimension(source.cast<py::dict>())
                        : batch_size.is_none() ? Shape{} : shape_from(batch_size));
  if (!source.is_none()) fill(tree, source.cast<py::dict>());
  return tree;
}

TensorTree params_from_python(const py::handle& source) {
  return tree_from_python(source, py::isinstance<TensorTree>(source) ? py::object(py::none()) : py::object(py::list()));
}

void bind_tree(py::module_& module) {
  py::class_<TensorTree> tree_class(module, "TensorTree", py::dynamic_attr(),
                         "Nested, string-keyed tensors sharing a leading batch_size: TensorDict in C++. "
                         "TensorTree({'obs': torch.zeros(4, 3), 'next': {'reward': numpy.ones(4)}}, "
                         "batch_size=[4]) views the arrays' memory without copying.");
  tree_class
      .def(py::init([](const py::object& source, const py::object& batch_size) {
             if (source.is_none() || !batch_size.is_none()) return tree_from_python(source, batch_size);
             throw InvalidArgument("TensorTree(dict, batch_size=[...]): give the batch size");
           }),
           py::arg("source") = py::none(), py::arg("batch_size") = py::none())
      .def_property_readonly("batch_size",
                             [](const TensorTree& tree) {
                               return py::tuple(py::cast(std::vector<std::int64_t>(tree.batch_size().begin(),
                                                                                   tree.batch_size().end())));
                             })
      .def("__getitem__", &entry_at, py::arg("key"))
      .def("__setitem__",
           [](TensorTree& tree, const py::handle& key, const py::handle& value) {
             set_entry(tree, path_from(key), value);
           })
      .def("__delitem__", [](TensorTree& tree, const py::handle& key) { tree.erase(path_from(key)); })
      .def("__contains__", [](const TensorTree& tree, const py::handle& key) { return tree.contains(path_from(key)); })
      .def("__len__", &TensorTree::size)
      .def("is_empty", &TensorTree::empty)
      .def(
          "keys",
          [](const TensorTree& tree, bool include_nested, bool leaves_only) {
            py::list keys;
            for (const Path& key : tree.keys({.include_nested = include_nested, .leaves_only = leaves_only})) {
              keys.append(key_object(key));
            }
            return keys;
          },
          py::arg("include_nested") = false, py::arg("leaves_only") = false,
          "The keys, in insertion order: strings, and tuples for nested ones (TensorDict's keys()).")
      .def("items",
           [](const TensorTree& tree, bool include_nested, bool leaves_only) {
             py::list items;
             for (const Path& key : tree.keys({.include_nested = include_nested, .leaves_only = leaves_only})) {
               items.append(py::make_tuple(key_object(key), entry_at(tree, py::tuple(py::cast(key)))));
             }
             return items;
           },
           py::arg("include_nested") = false, py::arg("leaves_only") = false)
      .def("to_dict", &cached_to_dict,
           "Nested dicts of torch tensors viewing this tree's memory (no copy). The tensors are made once per "
           "structure of the tree and given again while it is unchanged, as TensorDict gives its own.")
      .def("consolidate", [](const TensorTree& tree) { return tree.consolidate(); },
           py::call_guard<py::gil_scoped_release>(), "Every leaf packed into one buffer, in a new tree.")
      .def_property_readonly("is_consolidated", &TensorTree::is_consolidated)
      .def("clone", &TensorTree::clone, py::call_guard<py::gil_scoped_release>())
      .def("memmap_",
           [](TensorTree& tree, const std::filesystem::path& dir) -> TensorTree& { return tree.memmap_(dir); },
           py::arg("prefix"), py::call_guard<py::gil_scoped_release>(), py::return_value_policy::reference_internal,
           "Writes the tree in TensorDict's directory layout; its leaves then view the files.")
      .def_static("load_memmap", [](const std::filesystem::path& dir) { return TensorTree::load_memmap(dir); },
                  py::arg("prefix"), py::call_guard<py::gil_scoped_release>(),
                  "A tree saved by memmap_ (or TensorDict's memmap), mapped lazily.")
      .def("__repr__", &TensorTree::str);
  bind_tree_ops(tree_class, module);
}

}  // namespace tensortree::python
