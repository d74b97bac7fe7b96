// Many channels in Python: ChannelSet (the learner's channels of one listener, one wait, in turn)
// and ReconnectingChannel (an actor's channel that outlives its learner). A set's channels are
// reached by key (send, post, peer, remove), never as objects that could outlive their place in it.
#pragma once

#include <pybind11/pybind11.h>

namespace tensortree::python {

void bind_channel_set(pybind11::module_& module);

}  // namespace tensortree::python
