#include "tensor_binding.hpp"

#include <pybind11/stl.h>

#include <string>
#include <tuple>
#include <vector>

#include "tensortree/dlpack.hpp"
#include "tensortree/error.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

// A capsule nobody consumed still owns its tensor: release it through its deleter. Runs with the
// GIL held (the capsule is a Python object), and must not raise.
void release_unconsumed(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;  // consumed (renamed) or not ours
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

py::capsule dlpack_capsule(const Tensor& tensor) {
  DLManagedTensor* managed = to_dlpack(tensor);
  PyObject* capsule = PyCapsule_New(managed, kCapsuleName, &release_unconsumed);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

// Takes the tensor out of a "dltensor" capsule; the capsule is renamed only once tensortree owns
// it, so a refused one is still released by its own destructor.
Tensor tensor_from_capsule(const py::handle& capsule) {
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    throw InvalidArgument("from_dlpack: not an unconsumed DLPack capsule (named 'dltensor'); a capsule can be "
                          "consumed once");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  Tensor tensor = from_dlpack(managed);
  PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
  return tensor;
}

py::tuple shape_tuple(const Tensor& tensor) {
  return py::tuple(py::cast(std::vector<std::int64_t>(tensor.shape().begin(), tensor.shape().end())));
}

// DLPack's device type for the consumer: (kDLCPU, 0) or (kDLCUDA, index).
std::tuple<int, int> dlpack_device(const Tensor& tensor) {
  const Device device = tensor.device();
  if (device.is_cpu()) return {static_cast<int>(kDLCPU), 0};
  return {static_cast<int>(kDLCUDA), device.index()};
}

// The same memory and layout read as `dtype` (bool and uint8 share their bytes).
Tensor retyped(const Tensor& tensor, DType dtype) {
  return Tensor(tensor.storage(), tensor.byte_offset(), dtype, tensor.shape(), tensor.strides());
}

// torch 1.13 and NumPy 1.24 export no bool array through DLPack (nor import one): their bool
// arrays cross as their uint8 bytes, retyped on the other side.
bool is_bool_array(const py::handle& source) {
  if (!py::hasattr(source, "dtype")) return false;
  const std::string dtype = py::str(source.attr("dtype"));
  return dtype == "torch.bool" || dtype == "bool";
}

py::object uint8_type_of(const py::handle& source) {
  const std::string module = py::str(py::type::of(source).attr("__module__"));
  return py::module_::import(module.rfind("torch", 0) == 0 ? "torch" : "numpy").attr("uint8");
}

}  // namespace

Tensor tensor_from_python(const py::handle& source) {
  if (py::isinstance<Tensor>(source)) return source.cast<Tensor>();
  if (PyCapsule_CheckExact(source.ptr())) return tensor_from_capsule(source);
  if (!py::hasattr(source, "__dlpack__")) {
    throw InvalidArgument("from_dlpack: a " + std::string(py::str(py::type::of(source).attr("__name__"))) +
                          " is neither a tensortree.Tensor nor has __dlpack__ (a torch tensor, a NumPy array)");
  }
  if (is_bool_array(source)) {
    const py::object bytes = source.attr("view")(uint8_type_of(source));
    return retyped(tensor_from_capsule(bytes.attr("__dlpack__")()), DType::Bool);
  }
  return tensor_from_capsule(source.attr("__dlpack__")());
}

py::object to_torch(const Tensor& tensor) {
  // Never destroyed: a static py::object would be released after the interpreter has finalised.
  static const auto* const torch = new py::module_(py::module_::import("torch"));
  if (tensor.dtype() == DType::Bool) {
    return torch->attr("from_dlpack")(dlpack_capsule(retyped(tensor, DType::UInt8))).attr("view")(torch->attr("bool"));
  }
  return torch->attr("from_dlpack")(dlpack_capsule(tensor));
}

void bind_tensor(py::module_& module) {
  py::class_<Tensor>(module, "Tensor",
                     "A strided view of CPU or CUDA memory. Shares its memory with torch and NumPy through "
                     "DLPack: torch.from_dlpack(t), numpy.from_dlpack(t), tensortree.from_dlpack(x).")
      .def_property_readonly("shape", &shape_tuple, "The sizes, a tuple.")
      .def_property_readonly("dtype", [](const Tensor& tensor) { return std::string(dtype_name(tensor.dtype())); },
                             "The element type's name: 'float32', 'int64', 'bool', ...")
      .def_property_readonly("device", [](const Tensor& tensor) { return tensor.device().str(); },
                             "'cpu' or 'cuda:N'.")
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("data_ptr", [](const Tensor& tensor) { return reinterpret_cast<std::uintptr_t>(tensor.data_ptr()); },
           "The address of the first element, as torch's data_ptr().")
      .def("numel", &Tensor::numel)
      .def("clone", &Tensor::clone, py::call_guard<py::gil_scoped_release>(), "A contiguous copy.")
      .def("torch", &to_torch, "A torch tensor viewing this memory (no copy).")
      .def("__dlpack__", [](const Tensor& tensor, const py::object&) { return dlpack_capsule(tensor); },
           py::arg("stream") = py::none(),
           "A DLPack capsule of this memory. The library's own work on a tensor completes before it is "
           "returned to Python, so no stream needs to wait.")
      .def("__dlpack_device__", &dlpack_device)
      .def("__len__",
           [](const Tensor& tensor) {
             if (tensor.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return tensor.size(0);
           })
      .def("__repr__", &Tensor::str);
  module.def("from_dlpack", &tensor_from_python, py::arg("source"),
             "A tensortree.Tensor viewing `source`'s memory, without a copy: anything with __dlpack__ "
             "(torch, NumPy, CuPy) or a DLPack capsule.");
}

}  // namespace tensortree::python
