// Built without ZeroMQ: nodes and credentials cannot be made, and say why.
#include "tensortree/channel_credential.hpp"
#include "tensortree/error.hpp"
#include "transport/zeromq/zeromq_node.hpp"

namespace tensortree {

namespace {

[[noreturn]] void absent() {
  throw NotSupported("tree channels: this build has no ZeroMQ (install libzmq3-dev and cppzmq-dev, and build again)");
}

}  // namespace

ChannelCredential ChannelCredential::generate() { absent(); }
ChannelCredential ChannelCredential::from_text(std::string_view) { absent(); }
ChannelCredential ChannelCredential::from_environment() { absent(); }
ChannelCredential ChannelCredential::from_file(const std::filesystem::path&) { absent(); }
void ChannelCredential::save(const std::filesystem::path&) const { absent(); }

namespace zeromq {

std::shared_ptr<link::Node> listening_node(const std::string&, const NodeOptions&) { absent(); }
std::shared_ptr<link::Node> connecting_node(const NodeOptions&) { absent(); }
RefusalCounts refusals(const link::Node&) { return {}; }

}  // namespace zeromq

}  // namespace tensortree
