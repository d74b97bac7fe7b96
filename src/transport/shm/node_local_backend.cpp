#include "transport/shm/node_local_backend.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "transport/shm/frame.hpp"
#include "transport/shm/node_local_works.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

using State = NodeLocalBackend::State;

Tensor frame_message(std::size_t payload_bytes) {
  return Tensor::empty({static_cast<std::int64_t>(kFrameHeaderBytes + payload_bytes)}, {DType::UInt8});
}

std::byte* header_of(const Tensor& message) { return static_cast<std::byte*>(message.data_ptr()); }

}  // namespace

NodeLocalBackend::NodeLocalBackend(std::shared_ptr<ShareableMemory> memory, std::shared_ptr<PeerTransport> control,
                                   std::vector<std::uint8_t> local, NodeLocalOptions options)
    : control_(control) {
  if (static_cast<int>(local.size()) != control->size()) {
    throw InvalidArgument(fmt::format("NodeLocalBackend: {} peer flags for a group of {}", local.size(),
                                      control->size()));
  }
  name_ = "shared memory (" + std::string(memory->name()) + ")";
  state_ = std::make_shared<State>(std::move(memory), std::move(control), std::move(local), options);
}

bool NodeLocalBackend::is_local(int peer) const { return state_->is_local(peer); }

void NodeLocalBackend::require_local(int peer, const char* operation) const {
  if (peer == kAnySource || is_local(peer)) return;
  throw InvalidArgument(fmt::format("{} with rank {} on {}: that rank is not served through this node's memory (the "
                                    "group gives it another transport)", operation, peer, name_));
}

// Only while receives wait: otherwise the other transport's Work is returned as it is, and keeps
// what it does when dropped after a Timeout (it is abandoned at once, not waited for again).
WorkPtr NodeLocalBackend::progressing(WorkPtr work, const char* operation) {
  if (!state_->incoming.waiting()) return work;
  return std::make_shared<Progressing>(state_, std::move(work), operation);
}

TransportCapabilities NodeLocalBackend::capabilities() const {
  // The control transport's, for this transport's memory (CUDA memory is moved from the host too).
  TransportCapabilities capabilities = control_->capabilities();
  if (!state_->memory->device().is_cpu()) capabilities.cuda_memory = true;
  const bool all_local = std::count(state_->local.begin(), state_->local.end(), 1) == size() - 1;
  capabilities.any_source = state_->memory->device().is_cpu() ? control_->capabilities().any_source : all_local;
  return capabilities;
}

WorkPtr NodeLocalBackend::send(const Tensor& tensor, int dst, int tag) {
  require_local(dst, "send");
  State& state = *state_;
  const std::size_t nbytes = tensor.nbytes();
  if (nbytes <= state.options.inline_bytes) {
    Tensor message = frame_message(nbytes);
    encode_frame({FrameKind::Inline, nbytes, 0, 0, {}}, header_of(message));
    State::payload_of(message, nbytes).copy_(tensor.byte_view());
    return control_->send(message, dst, tag);
  }
  Tensor message = frame_message(0);
  if (const ExportedRegion in_place = state.memory->export_storage(tensor.storage())) {
    state.memory->publish(in_place);
    const std::uint64_t token = state.outgoing.expect_ack(dst, in_place, OutgoingRegions::Held::InPlace);
    encode_frame({FrameKind::Region, nbytes, tensor.byte_offset(), token, in_place.handle}, header_of(message));
    return std::make_shared<AwaitAck>(state_, dst, token, control_->send(message, dst, tag), tensor);
  }
  // Posting never waits (a peer that sends to this rank before receiving would deadlock): a copy
  // beyond the allowance is sent too, but its Work then waits for the receiver, as MPI's
  // rendezvous sends do, so a sender that waits on its sends holds no more than the allowance.
  const bool eager = state.outgoing.within_allowance(dst, nbytes, state.options.max_pending,
                                                     state.options.max_pending_bytes);
  // A large payload is streamed: its frame goes first, so that the receiver copies each piece out
  // while this rank copies the next one in.
  const std::size_t chunk = state.options.stream_chunk_bytes;
  const bool streamed = chunk > 0 && state.memory->streams() && nbytes > chunk;
  ExportedRegion region = state.outgoing.take(streamed ? kProgressBytes + nbytes : nbytes);
  const ExportedRegion target = region;
  if (!streamed) state.memory->copy_in(tensor, region);
  const std::uint64_t token = state.outgoing.expect_ack(
      dst, std::move(region), eager ? OutgoingRegions::Held::Copy : OutgoingRegions::Held::AwaitedCopy, streamed);
  const Frame frame = streamed ? Frame{FrameKind::Streamed, nbytes, kProgressBytes, token, target.handle}
                               : Frame{FrameKind::Region, nbytes, 0, token, target.handle};
  // However this call ends, the streamed region goes back to the pool only after its last write.
  std::optional<StreamedWrite> writing;
  if (streamed) writing.emplace(state.outgoing, dst, token);
  encode_frame(frame, header_of(message));
  if (streamed) state.memory->start_stream(target);  // a pooled region still counts its last payload
  WorkPtr frame_sent = control_->send(message, dst, tag);
  if (streamed) state.memory->copy_in_streamed(tensor, target, chunk);
  writing.reset();
  if (eager) return frame_sent;
  return std::make_shared<AwaitAck>(state_, dst, token, std::move(frame_sent), Tensor());
}

WorkPtr NodeLocalBackend::recv(const Tensor& tensor, int src, int tag) {
  require_local(src, "recv");
  const std::shared_ptr<State> state = state_;
  if (src != kAnySource) {
    Tensor message = frame_message(tensor.nbytes() <= state->options.inline_bytes ? tensor.nbytes() : 0);
    WorkPtr arrived = control_->recv(message, src, tag);
    auto receive = state->incoming.expect(
        std::move(arrived), src,
        [state, message, tensor, tag](int source) { return state->deliver(source, tag, message, tensor); },
        [state, message, tensor, src, tag] { state->explain_failed_receive(src, tag, message, tensor); });
    return std::make_shared<FrameReceive>(state, std::move(receive), src);
  }
  // From whoever sends first: a frame from a node-local peer, the payload itself from the others.
  if (!state->memory->device().is_cpu() && !capabilities().any_source) {
    throw NotSupported("recv from any source of CUDA tensors on a group whose peers are not all on this GPU");
  }
  auto frame = std::make_shared<Tensor>();
  auto choose = [state, frame, tensor, tag](int source, std::uint64_t bytes) -> Tensor {
    if (state->is_local(source)) return *frame = state->frame_buffer(source, bytes);
    if (bytes != tensor.nbytes()) throw InvalidArgument(state->wrong_length(source, tag, bytes, tensor));
    return tensor.byte_view();
  };
  WorkPtr arrived = control_->recv_matched(kAnySource, tag, std::move(choose));
  auto receive = state->incoming.expect(
      std::move(arrived), kAnySource,
      [state, frame, tensor, tag](int source) -> IncomingFrames::Continuation {
        if (!frame->defined()) return nullptr;  // a peer off the node: the payload landed in place
        return state->deliver(source, tag, *frame, tensor);
      },
      nullptr);
  return std::make_shared<FrameReceive>(state, std::move(receive), kAnySource);
}

ReceivedMessage NodeLocalBackend::recv_message(int src, int tag) {
  State& state = *state_;
  require_local(src, "recv_message");
  // The message lands in host memory, where a CUDA transport's peers send it as plain bytes.
  if (!state.memory->device().is_cpu()) return control_->recv_message(src, tag);
  // Matched without blocking, so that waiting for it settles this rank's other receives meanwhile.
  auto bytes = std::make_shared<Tensor>();
  WorkPtr arrived = control_->recv_matched(src, tag, [this, bytes](int source, std::uint64_t length) {
    if (is_local(source)) return *bytes = state_->frame_buffer(source, length);
    return *bytes = Tensor::empty({static_cast<std::int64_t>(length)}, {DType::UInt8});
  });
  state.wait_for(src == kAnySource ? "recv_message from any rank" : fmt::format("recv_message with rank {}", src), [&] {
    state.poll();
    return arrived->is_completed();
  });
  arrived->wait();  // rethrows a failed receive
  ReceivedMessage received{*bytes, arrived->source_rank()};
  if (!is_local(received.source)) return received;
  const auto* first = static_cast<const std::byte*>(received.bytes.data_ptr());
  const Frame frame = decode_frame({first, received.bytes.nbytes()}, received.source);
  if (in_region(frame.kind) && frame.length > state.options.max_message_bytes) {
    state.acknowledge(received.source, frame.token, false);
    throw CorruptData(fmt::format("recv_message: rank {} sent a message of {} bytes, more than this rank's limit of {} "
                                  "bytes (GroupOptions::max_message_bytes); nothing was allocated", received.source,
                                  frame.length, state.options.max_message_bytes));
  }
  Tensor payload = Tensor::empty({static_cast<std::int64_t>(frame.length)}, {DType::UInt8});
  if (frame.kind == FrameKind::Inline) {
    payload.copy_(State::payload_of(received.bytes, frame.length));
    return {std::move(payload), received.source};
  }
  if (const IncomingFrames::Continuation rest = state.take_region(received.source, frame, payload)) {
    // A stream: taken as it comes, with this rank's other receives settled meanwhile.
    state.wait_for(fmt::format("recv_message with rank {}", received.source), [&] {
      state.poll();
      return rest();
    });
  }
  return {std::move(payload), received.source};
}

WorkPtr NodeLocalBackend::batch_p2p(std::span<const P2POp> ops) {
  for (const P2POp& op : ops) require_local(op.peer, "batch_p2p");
  std::vector<WorkPtr> works;
  for (const P2POp& op : ops) {
    works.push_back(op.kind == P2POp::Kind::Send ? send(op.tensor, op.peer, op.tag) : recv(op.tensor, op.peer, op.tag));
  }
  if (works.size() == 1) return works.front();
  return Work::all(std::move(works));
}

StoragePtr NodeLocalBackend::allocate_message_buffer(std::size_t nbytes, Device device) {
  if (device != state_->memory->device()) return PeerTransport::allocate_message_buffer(nbytes, device);
  return state_->outgoing.allocate(nbytes).storage;
}

void NodeLocalBackend::abort(const std::string& reason) {
  state_->aborted.raise(reason);
  control_->abort(reason);
}

}  // namespace tensortree::detail
