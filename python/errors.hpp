// The Python face of tensortree's errors: a tensortree.Error hierarchy whose classes also derive
// from the builtin a Python user would catch (Timeout from TimeoutError, InvalidArgument from
// ValueError, ...), and the translator that raises them for the C++ exceptions.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>

namespace tensortree::python {

void bind_errors(pybind11::module_& module);
// The tensortree.<Error> instance a C++ error would be raised as (for a call that returns an
// error rather than raising it: a channel's end in ChannelSet.next).
pybind11::object error_object(std::exception_ptr error);

}  // namespace tensortree::python
