#include "errors.hpp"

#include <initializer_list>
#include <string>

#include "tensortree/error.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// tensortree.<name> for the C++ error `CppError`, deriving from `bases` (its parent's class and the
// builtin its kind of failure is caught as). pybind11 raises it for CppError and what derives from
// it; translators run newest first, so a class is registered after its parent's.
template <class CppError>
py::exception<CppError>& error_class(py::module_& module, const char* name, std::initializer_list<py::handle> bases,
                                     const char* doc) {
  py::tuple base_tuple(bases.size());
  std::size_t index = 0;
  for (const py::handle base : bases) base_tuple[index++] = py::reinterpret_borrow<py::object>(base);
  auto& created = py::register_exception<CppError>(module, name, base_tuple);
  created.attr("__doc__") = doc;
  return created;
}

}  // namespace

py::object error_object(std::exception_ptr error) {
  const py::module_ module = py::module_::import("tensortree");
  const auto make = [&](const char* name, const std::exception& e) { return module.attr(name)(e.what()); };
  try {
    std::rethrow_exception(std::move(error));
  } catch (const ChannelClosed& e) {
    return make("ChannelClosed", e);
  } catch (const PeerLost& e) {
    return make("PeerLost", e);
  } catch (const Timeout& e) {
    return make("Timeout", e);
  } catch (const CorruptData& e) {
    return make("CorruptData", e);
  } catch (const SchemaMismatch& e) {
    return make("SchemaMismatch", e);
  } catch (const InvalidArgument& e) {
    return make("InvalidArgument", e);
  } catch (const NotSupported& e) {
    return make("NotSupported", e);
  } catch (const BackendError& e) {
    return make("BackendError", e);
  } catch (const Error& e) {
    return make("Error", e);
  }
}

void bind_errors(py::module_& module) {
  const py::handle error = error_class<Error>(module, "Error", {PyExc_Exception}, "Every error tensortree raises.");
  error_class<InvalidArgument>(module, "InvalidArgument", {error, PyExc_ValueError},
                               "An argument the call cannot take.");
  error_class<SchemaMismatch>(module, "SchemaMismatch", {error, PyExc_ValueError},
                              "Two sides disagree on a tree's layout; the message names the key.");
  error_class<CorruptData>(module, "CorruptData", {error, PyExc_ValueError},
                           "Bytes from a peer or a file that fail their checks.");
  error_class<BackendError>(module, "BackendError", {error, PyExc_RuntimeError}, "A transport or engine failed.");
  error_class<Timeout>(module, "Timeout", {error, PyExc_TimeoutError}, "A bounded wait ran out.");
  error_class<PeerLost>(module, "PeerLost", {error, PyExc_ConnectionError}, "The process on the other side is gone.");
  error_class<ChannelClosed>(module, "ChannelClosed", {error, PyExc_EOFError},
                             "The peer closed the channel in order, after everything it sent.");
  error_class<NotSupported>(module, "NotSupported", {error, PyExc_NotImplementedError},
                            "Not available in this build or on this device.");
}

}  // namespace tensortree::python
