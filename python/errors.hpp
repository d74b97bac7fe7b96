// The Python face of tensortree's errors: a tensortree.Error hierarchy whose classes also derive
// from the builtin a Python user would catch (Timeout from TimeoutError, InvalidArgument from
// ValueError, ...), and the translator that raises them for the C++ exceptions.
#pragma once

#include <pybind11/pybind11.h>

namespace tensortree::python {

void bind_errors(pybind11::module_& module);

}  // namespace tensortree::python
