// Weights over tree channels: each version packed once, its number a leaf beside the parameters
// (as broadcast_weights carries it), and that one copy posted by every channel it is offered to.
#include "tensortree/channel_weights.hpp"

#include <limits>
#include <utility>

#include "channel/channel_access.hpp"
#include "channel/wire_tree.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

const Path kVersionKey{"version"};
const Path kParamsKey{"params"};

// The version a leaf on the parameters' device (a channel moves a tree of one device: CUDA
// parameters are staged through the host and land on the actor's GPU).
TensorTree version_message(const TensorTree& params, std::uint64_t version) {
  Tensor number = Tensor::empty({}, {DType::Int64});
  number.data<std::int64_t>()[0] = static_cast<std::int64_t>(version);
  TensorTree message;
  message.set(kVersionKey, number.to(params.device().value_or(Device::cpu())));
  message.set(kParamsKey, params);
  return message;
}

// The version and parameters of a message a ChannelWeightPublisher sent; CorruptData otherwise.
ChannelWeights weights_of(const TensorTree& message, const std::string& peer) {
  const bool has_version = message.contains(kVersionKey) && message.is_leaf(kVersionKey);
  const bool has_params = message.contains(kParamsKey) && !message.is_leaf(kParamsKey);
  if (!has_version || !has_params || message.size() != 2) {
    throw CorruptData(fmt::format("take_newest_weights: {} sent a tree that is not a weight version (a 'version' "
                                  "leaf and a 'params' subtree)", peer));
  }
  const Tensor number = message.get(kVersionKey).to(Device::cpu());
  if (number.dtype() != DType::Int64 || number.numel() != 1 || number.data<std::int64_t>()[0] <= 0) {
    throw CorruptData(fmt::format("take_newest_weights: the version {} sent is not a positive int64 scalar", peer));
  }
  return {static_cast<std::uint64_t>(number.data<std::int64_t>()[0]), message.subtree(kParamsKey)};
}

}  // namespace

struct ChannelWeightPublisher::State {
  // Which set was offered which version last, when it had had how many channels added.
  struct Offered {
    const ChannelSet* set = nullptr;
    std::uint64_t added = 0;
    std::uint64_t version = 0;
    bool operator==(const Offered&) const = default;
  };
  std::uint64_t version = 0;
  Offered offered;
  std::shared_ptr<const detail::WireTree> current;
  detail::BufferPool buffers;  // a version's buffer is reused once no channel holds it
};

ChannelWeightPublisher::ChannelWeightPublisher() : state_(std::make_unique<State>()) {}
ChannelWeightPublisher::ChannelWeightPublisher(ChannelWeightPublisher&&) noexcept = default;
ChannelWeightPublisher& ChannelWeightPublisher::operator=(ChannelWeightPublisher&&) noexcept = default;
ChannelWeightPublisher::~ChannelWeightPublisher() = default;

std::uint64_t ChannelWeightPublisher::publish(const TensorTree& params) {
  return publish(params, state_->version + 1);
}

std::uint64_t ChannelWeightPublisher::publish(const TensorTree& params, std::uint64_t version) {
  if (version <= state_->version || version > std::numeric_limits<std::int64_t>::max()) {
    throw InvalidArgument(fmt::format("ChannelWeightPublisher::publish: version {} after version {}; versions grow "
                                      "and fit an int64", version, state_->version));
  }
  state_->current =
      detail::pack_wire_tree(version_message(params, version), state_->buffers, "ChannelWeightPublisher::publish");
  state_->version = version;
  return version;
}

std::uint64_t ChannelWeightPublisher::version() const { return state_->version; }

void ChannelWeightPublisher::offer_to(TreeChannel& channel) const {
  detail::ChannelAccess::offer(channel, state_->current);
}

void ChannelWeightPublisher::offer_to(ChannelSet& channels) const {
  const State::Offered now{&channels, channels.added(), state_->version};
  if (now == state_->offered) return;
  channels.for_each([&](ChannelSet::Key, TreeChannel& channel) { offer_to(channel); });
  state_->offered = now;
}

std::optional<ChannelWeights> take_newest_weights(TreeChannel& channel, std::chrono::milliseconds wait) {
  std::optional<TensorTree> newest = channel.try_recv(wait);
  if (!newest) return std::nullopt;
  while (std::optional<TensorTree> next = channel.try_recv(std::chrono::milliseconds{0})) newest = std::move(next);
  return weights_of(*newest, channel.peer());
}

}  // namespace tensortree
