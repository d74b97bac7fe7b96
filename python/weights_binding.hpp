// Weight publication in Python: WeightPublisher(name).publish(tree or dict), WeightSubscriber(name)
// whose latest() is a context manager holding one version (its leaves are views of the shared
// slot, valid inside the with-block), and the policy-version helpers stamp_policy_version and
// drop_stale_rows.
#pragma once

#include <pybind11/pybind11.h>

namespace tensortree::python {

void bind_weights(pybind11::module_& module);

}  // namespace tensortree::python
