#include "errors.hpp"

#include <Python.h>

#include <exception>

#include "tensortree/error.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// The exception classes, created once with the module (they live as long as the interpreter).
struct ErrorClasses {
  PyObject* error = nullptr;
  PyObject* invalid_argument = nullptr;
  PyObject* schema_mismatch = nullptr;
  PyObject* corrupt_data = nullptr;
  PyObject* backend_error = nullptr;
  PyObject* timeout = nullptr;
  PyObject* peer_lost = nullptr;
  PyObject* not_supported = nullptr;
};

ErrorClasses& classes() {
  static ErrorClasses created;
  return created;
}

// A class tensortree.<name> deriving from `bases` (a C++ error's class and the builtin its kind of
// failure is caught as), added to `module`.
PyObject* new_error_class(py::module_& module, const char* name, std::initializer_list<PyObject*> bases,
                          const char* doc) {
  py::tuple base_tuple(bases.size());
  std::size_t index = 0;
  for (PyObject* base : bases) base_tuple[index++] = py::reinterpret_borrow<py::object>(base);
  const std::string qualified = std::string("tensortree.") + name;
  PyObject* created = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (created == nullptr) throw py::error_already_set();
  module.add_object(name, py::reinterpret_borrow<py::object>(created));
  return created;
}

void translate(std::exception_ptr thrown) {
  const ErrorClasses& error = classes();
  try {
    std::rethrow_exception(thrown);
  } catch (const SchemaMismatch& failure) {
    PyErr_SetString(error.schema_mismatch, failure.what());
  } catch (const InvalidArgument& failure) {
    PyErr_SetString(error.invalid_argument, failure.what());
  } catch (const CorruptData& failure) {
    PyErr_SetString(error.corrupt_data, failure.what());
  } catch (const Timeout& failure) {
    PyErr_SetString(error.timeout, failure.what());
  } catch (const PeerLost& failure) {
    PyErr_SetString(error.peer_lost, failure.what());
  } catch (const NotSupported& failure) {
    PyErr_SetString(error.not_supported, failure.what());
  } catch (const BackendError& failure) {
    PyErr_SetString(error.backend_error, failure.what());
  } catch (const Error& failure) {
    PyErr_SetString(error.error, failure.what());
  }
}

}  // namespace

void bind_errors(py::module_& module) {
  ErrorClasses& error = classes();
  error.error = new_error_class(module, "Error", {PyExc_Exception}, "Every error tensortree raises.");
  error.invalid_argument = new_error_class(module, "InvalidArgument", {error.error, PyExc_ValueError},
                                           "An argument the call cannot take.");
  error.schema_mismatch = new_error_class(module, "SchemaMismatch", {error.error, PyExc_ValueError},
                                          "Two sides disagree on a tree's layout; the message names the key.");
  error.corrupt_data = new_error_class(module, "CorruptData", {error.error, PyExc_ValueError},
                                       "Bytes from a peer or a file that fail their checks.");
  error.backend_error = new_error_class(module, "BackendError", {error.error, PyExc_RuntimeError},
                                        "A transport or engine failed.");
  error.timeout = new_error_class(module, "Timeout", {error.error, PyExc_TimeoutError},
                                  "A bounded wait ran out.");
  error.peer_lost = new_error_class(module, "PeerLost", {error.error, PyExc_ConnectionError},
                                    "The process on the other side is gone.");
  error.not_supported = new_error_class(module, "NotSupported", {error.error, PyExc_NotImplementedError},
                                        "Not available in this build or on this device.");
  py::register_exception_translator(&translate);
}

}  // namespace tensortree::python
