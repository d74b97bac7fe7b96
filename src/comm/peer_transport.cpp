#include "tensortree/peer_transport.hpp"

#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

[[noreturn]] void unsupported(const PeerTransport& transport, std::string_view operation) {
  throw NotSupported(fmt::format("{} does not support {}", transport.name(), operation));
}

}  // namespace

WorkPtr PeerTransport::send(const Tensor&, int, int) { unsupported(*this, "send"); }
WorkPtr PeerTransport::recv(const Tensor&, int, int) { unsupported(*this, "recv"); }
ReceivedMessage PeerTransport::recv_message(int, int) { unsupported(*this, "recv_message"); }
WorkPtr PeerTransport::recv_matched(int, int, ChooseDestination) { unsupported(*this, "recv_matched"); }
StoragePtr PeerTransport::allocate_message_buffer(std::size_t nbytes, Device device) {
  return Storage::allocate(nbytes, device);
}
WorkPtr PeerTransport::batch_p2p(std::span<const P2POp>) { unsupported(*this, "batch_p2p"); }
WorkPtr PeerTransport::progressing(WorkPtr work, const char*) { return work; }
void PeerTransport::abort(const std::string&) {}

}  // namespace tensortree
