#include "transport/shm/node_local_state.hpp"

#include <optional>

#include "comm/abandoned_operations.hpp"
#include "core/checked_math.hpp"
#include "transport/shm/streamed_copy.hpp"

namespace tensortree::detail {

using State = NodeLocalBackend::State;

State::State(std::shared_ptr<ShareableMemory> memory_in, std::shared_ptr<PeerTransport> control_in,
             std::vector<std::uint8_t> local_in, NodeLocalOptions options_in)
    : memory(std::move(memory_in)),
      control(std::move(control_in)),
      local(std::move(local_in)),
      options(options_in),
      outgoing(*memory, *control, static_cast<int>(local.size()), options.max_pooled_regions,
               options.max_pooled_bytes),
      imported(*memory, options.max_open_regions),
      releases(control, imported, static_cast<int>(local.size())),
      acknowledged_to(local.size()) {}

State::~State() {
  if (!aborted.raised()) ReleaseRequests::close(*control, outgoing.region_peers());
  for (std::size_t peer = 0; peer < acknowledged_to.size(); ++peer) {
    if (!acknowledged_to[peer].load(std::memory_order_acquire) || aborted.raised()) continue;
    try {
      Tensor closing = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
      encode_ack({kClosingToken, true}, static_cast<std::byte*>(closing.data_ptr()));
      abandon_unless_completed(control->send(closing, static_cast<int>(peer), kAckTag));
    } catch (...) {
      // The control transport failed: the peer keeps its regions (a bounded leak, never a read
      // of freed memory).
    }
  }
}

void State::acknowledge(int peer, std::uint64_t token, bool copied) {
  acknowledged_to[static_cast<std::size_t>(peer)].store(true, std::memory_order_release);
  releases.expect_from(peer);  // the peer may let go of the region and ask this rank to close it
  Tensor ack = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
  encode_ack({token, copied}, static_cast<std::byte*>(ack.data_ptr()));
  control->send(ack, peer, kAckTag)->wait();
}

template <class Step>
auto State::refusing(int peer, const Frame& frame, Step&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const CorruptData& error) {
    acknowledge(peer, frame.token, false);
    throw CorruptData(fmt::format("node-local transport: rank {} sent a frame naming memory this rank refuses: {}",
                                  peer, error.what()));
  } catch (const BackendError& error) {
    acknowledge(peer, frame.token, false);
    throw BackendError(fmt::format("node-local transport: the memory rank {}'s frame names cannot be opened: {}",
                                   peer, error.what()));
  } catch (...) {
    acknowledge(peer, frame.token, false);
    throw;
  }
}

namespace {

// A stream being taken over several polls. Dropped before its end (the receive was cancelled, or
// its backend went), the frame is refused, so that its sender does not wait for an acknowledgement.
class PendingStream {
 public:
  PendingStream(State& state, int peer, std::uint64_t token, StreamedCopy copy)
      : state_(state), peer_(peer), token_(token), copy_(std::move(copy)) {}
  PendingStream(const PendingStream&) = delete;
  PendingStream& operator=(const PendingStream&) = delete;
  ~PendingStream() {
    if (settled_) return;
    try {
      state_.acknowledge(peer_, token_, false);
    } catch (...) {
      // The control transport failed: the sender learns nothing more from this rank anyway.
    }
  }

  // One step of the copy; once it is all in, the frame is acknowledged as copied.
  bool advance() {
    settled_ = true;  // a failure below is refused by the caller
    if (!copy_.advance(peer_)) {
      settled_ = false;
      return false;
    }
    state_.acknowledge(peer_, token_, true);
    return true;
  }

 private:
  State& state_;
  int peer_;
  std::uint64_t token_;
  StreamedCopy copy_;
  bool settled_ = false;
};

}  // namespace

IncomingFrames::Continuation State::take_region(int peer, const Frame& frame, const Tensor& destination) {
  const std::shared_ptr<PendingStream> stream = refusing(peer, frame, [&]() -> std::shared_ptr<PendingStream> {
    const std::optional<std::uint64_t> end = checked_add(frame.offset, frame.length);
    if (!end) {
      throw CorruptData(fmt::format("node-local transport: the frame from rank {} reaches past 2^64 bytes "
                                    "(offset {})", peer, frame.offset));
    }
    std::shared_ptr<ImportedRegion> region = imported.open(peer, frame.handle, *end);
    if (frame.kind != FrameKind::Streamed) {
      memory->copy_out(*region, frame.offset, destination);
      return nullptr;
    }
    StreamedCopy copy(*memory, std::move(region), frame, destination, deadline_after(options.timeout));
    return std::make_shared<PendingStream>(*this, peer, frame.token, std::move(copy));
  });
  if (!stream) {
    acknowledge(peer, frame.token, true);
    return nullptr;
  }
  return [this, peer, frame, stream] {
    aborted.throw_if_raised([&] { return fmt::format("rank {}: recv from rank {}", control->rank(), peer); });
    return refusing(peer, frame, [&] { return stream->advance(); });
  };
}

std::string State::wrong_length(int peer, int tag, std::uint64_t bytes, const Tensor& destination) const {
  const std::size_t item = itemsize(destination.dtype());
  const bool whole = item > 0 && bytes % item == 0;
  const std::string unit = whole ? " elements" : " bytes";
  const std::uint64_t sent = whole ? bytes / item : bytes;
  const std::uint64_t room = whole ? static_cast<std::uint64_t>(destination.numel()) : destination.nbytes();
  return fmt::format("rank {} received {}{} from rank {} (tag {}) into a tensor of {}{}", control->rank(), sent, unit,
                     peer, tag, room, unit);
}

Tensor State::frame_buffer(int peer, std::uint64_t bytes) const {
  const std::size_t largest = kFrameHeaderBytes + options.inline_bytes;
  if (bytes > largest) {
    throw CorruptData(fmt::format("node-local transport: rank {} sent a frame of {} bytes, more than the {} a frame "
                                  "may have", peer, bytes, largest));
  }
  return Tensor::empty({static_cast<std::int64_t>(bytes)}, {DType::UInt8});
}

IncomingFrames::Continuation State::deliver(int peer, int tag, const Tensor& message, const Tensor& destination) {
  const auto* first = static_cast<const std::byte*>(message.data_ptr());
  const Frame frame = decode_frame_header({first, message.nbytes()}, peer);
  if (frame.length != destination.nbytes()) {
    if (in_region(frame.kind)) acknowledge(peer, frame.token, false);
    throw InvalidArgument(wrong_length(peer, tag, frame.length, destination));
  }
  if (frame.kind == FrameKind::Inline) {
    if (kFrameHeaderBytes + frame.length > message.nbytes()) {
      throw CorruptData(fmt::format("node-local transport: rank {} sent an inline frame of {} bytes in a message "
                                    "of at most {}", peer, frame.length, message.nbytes()));
    }
    destination.byte_view().copy_(payload_of(message, frame.length));
    return nullptr;
  }
  return take_region(peer, frame, destination);
}

void State::explain_failed_receive(int peer, int tag, const Tensor& message, const Tensor& destination) {
  std::optional<Frame> frame;
  try {
    const auto* first = static_cast<const std::byte*>(message.data_ptr());
    frame = decode_frame_header({first, kFrameHeaderBytes}, peer);
  } catch (const Error&) {
    return;  // not even a header arrived: MPI's error stands
  }
  if (in_region(frame->kind)) acknowledge(peer, frame->token, false);
  if (frame->length != destination.nbytes()) throw InvalidArgument(wrong_length(peer, tag, frame->length, destination));
}

}  // namespace tensortree::detail
