// TensorTree.to_dict: nested dicts of torch tensors viewing the tree's memory. Creating a torch
// tensor is what costs (a DLPack import is about 12 us in torch 1.13, an as_strided view about 4),
// so leaves that share one storage (a consolidated tree, a sampled batch, a leased weight version)
// come from one DLPack export of that storage, each an as_strided view of it; other leaves, and
// dtypes or offsets a typed view cannot express, are exported one by one.
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor_binding.hpp"
#include "tensortree/tree.hpp"
#include "tree_binding.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// Torch views of the leaves of one storage, from a single export of its bytes.
class StorageViews {
 public:
  explicit StorageViews(const StoragePtr& storage)
      : bytes_(to_torch(Tensor(storage, 0, DType::UInt8, Shape{static_cast<std::int64_t>(storage->nbytes())}, Strides{1}))),
        nbytes_(storage->nbytes()) {}

  // nullopt when `leaf` cannot be a typed view of the bytes (a dtype torch lacks, an offset that is
  // not a multiple of the element size).
  std::optional<py::object> view(const Tensor& leaf) {
    const std::size_t itemsize = leaf.itemsize();
    if (leaf.byte_offset() % itemsize != 0) return std::nullopt;
    const py::object* typed = typed_base(leaf.dtype());
    if (typed == nullptr) return std::nullopt;
    static const auto* const as_strided_name = new py::str("as_strided");
    return typed->attr(*as_strided_name)(shape_list(leaf.shape()), shape_list(leaf.strides()),
                                         leaf.byte_offset() / itemsize);
  }

 private:
  static py::tuple shape_list(std::span<const std::int64_t> sizes) {
    py::tuple out(sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) out[i] = py::int_(sizes[i]);
    return out;
  }

  // The bytes viewed as `dtype` (its whole elements), made once per dtype; null for a dtype torch
  // does not have.
  const py::object* typed_base(DType dtype) {
    if (const auto found = typed_.find(dtype); found != typed_.end()) return found->second ? &*found->second : nullptr;
    std::optional<py::object>& slot = typed_[dtype];
    const py::module_ torch = py::module_::import("torch");
    const std::string name(dtype_name(dtype));
    if (!py::hasattr(torch, name.c_str())) return nullptr;
    const std::size_t whole = nbytes_ - nbytes_ % itemsize(dtype);
    slot = bytes_[py::slice(0, static_cast<py::ssize_t>(whole), 1)].attr("view")(torch.attr(name.c_str()));
    return &*slot;
  }

  py::object bytes_;
  std::size_t nbytes_;
  std::map<DType, std::optional<py::object>> typed_;
};

class DictBuilder {
 public:
  py::dict build(const TensorTree& tree) {
    py::dict out;
    for (const Path& key : tree.keys()) {
      const py::str name(key.front());
      out[name] = tree.is_leaf(key) ? leaf(tree.get(key)) : py::object(build(tree.subtree(key)));
    }
    return out;
  }

 private:
  py::object leaf(const Tensor& tensor) {
    if (tensor.device().is_cpu() && tensor.numel() > 0) {
      auto [views, inserted] = views_.try_emplace(tensor.storage().get());
      if (inserted) views->second.emplace(tensor.storage());
      if (std::optional<py::object> view = views->second->view(tensor)) return std::move(*view);
    }
    return to_torch(tensor);
  }

  std::map<const Storage*, std::optional<StorageViews>> views_;
};

}  // namespace

py::dict tree_to_dict(const TensorTree& tree) { return DictBuilder().build(tree); }

}  // namespace tensortree::python
