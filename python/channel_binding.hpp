// Tree channels in Python, the C++ API's names: TreeListener.bind(address) and accept(wait),
// TreeChannel.connect(address), send / post / flush / recv / try_recv, and the weights over
// channels (ChannelWeightPublisher, take_newest_weights). Waiting calls release the GIL.
#pragma once

#include <pybind11/pybind11.h>

namespace tensortree::python {

void bind_channels(pybind11::module_& module);

}  // namespace tensortree::python
