// Weights across nodes: the parameters and their version leave the root as one tree broadcast.
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/group.hpp"
#include "tensortree/weights.hpp"

namespace tensortree {

namespace {

const Path kVersionKey{"version"};
const Path kParamsKey{"params"};

// The version as a leaf on the parameters' device: a tree broadcast moves leaves of one device.
Tensor version_leaf(std::uint64_t version, Device device) {
  Tensor leaf = Tensor::empty({}, {DType::Int64});
  leaf.data<std::int64_t>()[0] = static_cast<std::int64_t>(version);
  return leaf.to(device);
}

}  // namespace

std::uint64_t broadcast_weights(const Group& group, int root, TensorTree& params, std::uint64_t version) {
  // One tree carries both, so the version costs no message of its own. A receiver whose params have
  // the layout lends their leaves to the message tree, which then receives into them in place.
  TensorTree message;
  message.set(kVersionKey, version_leaf(version, params.device().value_or(Device::cpu())));
  const bool receiving_in_place = group.rank() != root && !params.empty();
  if (group.rank() == root || receiving_in_place) message.set(kParamsKey, params);
  if (group.rank() != root && !receiving_in_place) message = TensorTree();
  message.broadcast(root, group);
  if (group.rank() == root) return version;
  const std::int64_t received = message.get(kVersionKey).to(Device::cpu()).data<std::int64_t>()[0];
  if (received < 0) throw CorruptData(fmt::format("broadcast_weights: rank {} sent version {}", root, received));
  params = message.subtree(kParamsKey);
  return static_cast<std::uint64_t>(received);
}

}  // namespace tensortree
