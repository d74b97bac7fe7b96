// The Python module `tensortree`: tensors and trees over the C++ library's public API, sharing
// memory with PyTorch and NumPy through DLPack. Errors arrive as tensortree.Error's subclasses.
#include <pybind11/pybind11.h>

#include "channel_binding.hpp"
#include "channel_set_binding.hpp"
#include "errors.hpp"
#include "replay_binding.hpp"
#include "tensor_binding.hpp"
#include "tensortree/device.hpp"
#include "tree_binding.hpp"
#include "weights_binding.hpp"

PYBIND11_MODULE(tensortree, module) {
  module.doc() = "TensorTree: nested batches of tensors moved between processes as single messages.";
  module.attr("build_features") = tensortree::build_features();
  tensortree::python::bind_errors(module);
  tensortree::python::bind_tensor(module);
  tensortree::python::bind_tree(module);
  tensortree::python::bind_replay(module);
  tensortree::python::bind_weights(module);
  tensortree::python::bind_channels(module);
  tensortree::python::bind_channel_set(module);
}
