#include "transport/shm/node_local_backend.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "comm/abandoned_operations.hpp"
#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "transport/shm/frame.hpp"
#include "transport/shm/incoming_frames.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

struct NodeLocalBackend::State {
  State(std::shared_ptr<ShareableMemory> memory_in, std::shared_ptr<PeerTransport> control_in,
        std::vector<std::uint8_t> local_in, NodeLocalOptions options_in)
      : memory(std::move(memory_in)),
        control(std::move(control_in)),
        local(std::move(local_in)),
        options(options_in),
        outgoing(*memory, *control, static_cast<int>(local.size()), options.max_pooled_regions,
                 options.max_pooled_bytes),
        imported(*memory, options.max_open_regions),
        acknowledged_to(local.size()) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  // Tells every peer whose region frames this rank acknowledged (copied or refused) that it reads
  // none of its regions again (kClosingToken), after its last acknowledgement to that peer: the
  // peer then frees the regions it still holds for frames this rank never took, instead of keeping
  // them for good. Only those peers: each posted a receive for the closing with its first region
  // frame, and a message on kAckTag that no receive takes would outlive the communicator. Nothing
  // is waited for.
  ~State() {
    for (std::size_t peer = 0; peer < acknowledged_to.size(); ++peer) {
      if (!acknowledged_to[peer].load(std::memory_order_acquire) || aborted.raised()) continue;
      try {
        Tensor closing = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
        encode_ack({kClosingToken, true}, static_cast<std::byte*>(closing.data_ptr()));
        WorkPtr sent = control->send(closing, static_cast<int>(peer), kAckTag);
        if (!sent->is_completed()) {
          abandon_operation([sent]() noexcept {
            try {
              return sent->is_completed();
            } catch (...) {
              return true;
            }
          });
        }
      } catch (...) {
        // The control transport failed: the peer keeps its regions (a bounded leak, never a read
        // of freed memory).
      }
    }
  }

  bool is_local(int peer) const {
    return peer >= 0 && static_cast<std::size_t>(peer) < local.size() && local[static_cast<std::size_t>(peer)] != 0;
  }

  // Polls `done` within the group's timeout; BackendError once aborted. Spinning (yielding), as
  // MPI's waits do: frames move only inside these polls, here and in the peer, and a sleep between
  // them would stall the transfer itself.
  // `limit`: what is left of the group's timeout, for a wait that polls in several stretches.
  template <class Done>
  void wait_for(const std::string& what, Done&& done, std::chrono::milliseconds limit) {
    const auto done_or_aborted = [&] {
      aborted.throw_if_raised([&] { return fmt::format("rank {}: {}", control->rank(), what); });
      return done();
    };
    wait_bounded(done_or_aborted, limit, [&] {
      return Timeout(fmt::format("rank {}: {} did not complete within the group's timeout of {} ms "
                                 "(GroupOptions::timeout); wait again, or end the group with Group::abort",
                                 control->rank(), what, options.timeout.count()));
    }, WaitStyle::Spin);
  }
  template <class Done>
  void wait_for(const std::string& what, Done&& done) {
    wait_for(what, std::forward<Done>(done), options.timeout);
  }

  void acknowledge(int peer, std::uint64_t token, bool copied) {
    acknowledged_to[static_cast<std::size_t>(peer)].store(true, std::memory_order_release);
    Tensor ack = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
    encode_ack({token, copied}, static_cast<std::byte*>(ack.data_ptr()));
    control->send(ack, peer, kAckTag)->wait();
  }

  // Copies a region frame's payload into `destination` and acknowledges it, refused if that fails.
  void take_region(int peer, const Frame& frame, const Tensor& destination) {
    try {
      const std::optional<std::uint64_t> end = checked_add(frame.offset, frame.length);
      if (!end) {
        throw CorruptData(fmt::format("node-local transport: the frame from rank {} reaches past 2^64 bytes "
                                      "(offset {})", peer, frame.offset));
      }
      const std::shared_ptr<ImportedRegion> region = imported.open(peer, frame.handle, *end);
      if (frame.kind == FrameKind::Streamed) {
        copy_streamed(peer, *region, frame, destination);
      } else {
        memory->copy_out(*region, frame.offset, destination);
      }
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
    acknowledge(peer, frame.token, true);
  }

  // A Streamed frame's payload, copied out piece by piece as the sender writes it. The sender
  // writes without waiting for anything, so the wait ends unless it died or stalls: the whole copy,
  // however many pieces, is bounded by one group timeout (a peer that advances its count a byte at
  // a time gets no more).
  void copy_streamed(int peer, ImportedRegion& region, const Frame& frame, const Tensor& destination) {
    if (!memory->streams() || frame.offset < kProgressBytes) {
      throw CorruptData(fmt::format("a streamed payload at offset {}{}", frame.offset,
                                    memory->streams() ? ", over its region's progress count"
                                                      : " in memory that is not streamed"));
    }
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    std::uint64_t copied = 0;
    while (copied < frame.length) {
      std::uint64_t written = memory->streamed_bytes(region);
      if (written == copied) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        wait_for(fmt::format("recv from rank {} (waiting for it to write its payload)", peer), [&] {
          written = memory->streamed_bytes(region);
          return written != copied;
        }, std::max(left, std::chrono::milliseconds(0)));
      }
      if (written < copied || written > frame.length) {
        throw CorruptData(fmt::format("a progress count of {} bytes after {}, of a payload of {}", written, copied,
                                      frame.length));
      }
      memory->copy_out_part(region, frame.offset, destination, copied, written);
      copied = written;
    }
  }

  // "rank 1 received 7 elements from rank 0 (tag 77) into a tensor of 9 elements", as MPI says it.
  std::string wrong_length(int peer, int tag, std::uint64_t bytes, const Tensor& destination) const {
    const std::size_t item = itemsize(destination.dtype());
    const bool whole = item > 0 && bytes % item == 0;
    const std::string unit = whole ? " elements" : " bytes";
    const std::uint64_t sent = whole ? bytes / item : bytes;
    const std::uint64_t room = whole ? static_cast<std::uint64_t>(destination.numel()) : destination.nbytes();
    return fmt::format("rank {} received {}{} from rank {} (tag {}) into a tensor of {}{}", control->rank(), sent, unit,
                       peer, tag, room, unit);
  }

  // A buffer for a frame of `bytes` from the node-local `peer`, bounded before it is allocated.
  Tensor frame_buffer(int peer, std::uint64_t bytes) const {
    const std::size_t largest = kFrameHeaderBytes + options.inline_bytes;
    if (bytes > largest) {
      throw CorruptData(fmt::format("node-local transport: rank {} sent a frame of {} bytes, more than the {} a frame "
                                    "may have", peer, bytes, largest));
    }
    return Tensor::empty({static_cast<std::int64_t>(bytes)}, {DType::UInt8});
  }

  // A frame that arrived for `destination`: its payload moved there (and acknowledged). `message`
  // is the buffer the frame landed in, sized for the frame this rank expected: a frame for another
  // length may be shorter (MPI says nothing of that), so its header alone is decoded, and a region
  // frame of the wrong length is refused, acknowledged all the same.
  void deliver(int peer, int tag, const Tensor& message, const Tensor& destination) {
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
      return;
    }
    take_region(peer, frame, destination);
  }

  // A receive whose frame had another length than expected (MPI found it): a region frame is
  // refused, so that its sender does not wait for an acknowledgement that never comes, and the
  // error names the payload's length rather than the frame's.
  void explain_failed_receive(int peer, int tag, const Tensor& message, const Tensor& destination) {
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

  static Tensor payload_of(const Tensor& message, std::uint64_t length) {
    return Tensor(message.storage(), message.byte_offset() + kFrameHeaderBytes, DType::UInt8,
                  {static_cast<std::int64_t>(length)}, {1});
  }

  std::shared_ptr<ShareableMemory> memory;
  std::shared_ptr<PeerTransport> control;
  std::vector<std::uint8_t> local;
  NodeLocalOptions options;
  OutgoingRegions outgoing;
  ImportedRegions imported;
  IncomingFrames incoming;
  AbortSignal aborted;
  // By group rank: whether this rank acknowledged a region frame of that peer's, whose first such
  // frame posted a receive for the closing this rank then sends it at the end.
  std::vector<std::atomic<bool>> acknowledged_to;
};

namespace {

using State = NodeLocalBackend::State;

Tensor frame_message(std::size_t payload_bytes) {
  return Tensor::empty({static_cast<std::int64_t>(kFrameHeaderBytes + payload_bytes)}, {DType::UInt8});
}

std::byte* header_of(const Tensor& message) { return static_cast<std::byte*>(message.data_ptr()); }

// A send complete once the receiver acknowledged it: from memory the receiver reads in place
// (`payload`, kept until then), or a copy beyond the peer's allowance (`payload` undefined).
class AwaitAck final : public Work {
 public:
  AwaitAck(std::shared_ptr<State> state, int peer, std::uint64_t token, WorkPtr frame_sent, Tensor payload)
      : state_(std::move(state)), peer_(peer), token_(token), frame_sent_(std::move(frame_sent)),
        payload_(std::move(payload)) {}
  AwaitAck(const AwaitAck&) = delete;
  AwaitAck& operator=(const AwaitAck&) = delete;
  // The receiver may still be reading the payload: it is kept until the acknowledgement comes.
  ~AwaitAck() override {
    if (acked_) return;
    abandon_operation([state = state_, peer = peer_, token = token_, payload = payload_]() noexcept {
      try {
        return state->outgoing.acknowledged(peer, token);
      } catch (...) {
        return true;  // refused, or the acknowledgement cannot come: nothing reads the payload
      }
    });
  }

 protected:
  bool test() override {
    state_->incoming.progress();  // the peer may be waiting for this rank's acknowledgements too
    if (!frame_sent_->is_completed()) return false;
    if (const std::exception_ptr error = frame_sent_->exception()) {
      acked_ = true;  // the frame never left: nobody reads the payload
      std::rethrow_exception(error);
    }
    if (!acked_) acked_ = state_->outgoing.acknowledged(peer_, token_);
    return acked_;
  }
  void block() override {
    state_->wait_for(fmt::format("send to rank {} (waiting for it to take the shared memory)", peer_),
                     [this] { return test(); });
  }

 private:
  std::shared_ptr<State> state_;
  int peer_;
  std::uint64_t token_;
  WorkPtr frame_sent_;
  Tensor payload_;
  bool acked_ = false;
};

// A receive through IncomingFrames: complete once any poll of the backend's Works settled it.
class FrameReceive final : public Work {
 public:
  FrameReceive(std::shared_ptr<State> state, std::shared_ptr<const IncomingFrames::Receive> receive, int peer)
      : state_(std::move(state)), receive_(std::move(receive)), peer_(peer) {}
  FrameReceive(const FrameReceive&) = delete;
  FrameReceive& operator=(const FrameReceive&) = delete;
  // A frame that already arrived is taken (MPI would have put it in the buffer too); otherwise the
  // receive is cancelled with the record.
  ~FrameReceive() override {
    if (!receive_->settled()) state_->incoming.progress();
  }

  int source_rank() const override {
    if (peer_ != kAnySource || !receive_->settled()) return Work::source_rank();
    return receive_->source();
  }

 protected:
  bool test() override {
    state_->incoming.progress();
    return receive_->settled();
  }
  void block() override {
    state_->wait_for(peer_ == kAnySource ? "recv with any rank" : fmt::format("recv with rank {}", peer_),
                     [this] { return test(); });
  }
  void finish() override {
    if (const std::exception_ptr error = receive_->error()) std::rethrow_exception(error);
  }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<const IncomingFrames::Receive> receive_;
  int peer_;
};

// Another transport's operation that settles the frame receives whenever it is polled.
class Progressing final : public Work {
 public:
  Progressing(std::shared_ptr<State> state, WorkPtr inner, const char* operation)
      : state_(std::move(state)), inner_(std::move(inner)), operation_(operation) {}

  int source_rank() const override { return inner_->source_rank(); }

 protected:
  bool test() override {
    state_->incoming.progress();
    return inner_->is_completed();
  }
  void block() override { state_->wait_for(operation_, [this] { return test(); }); }
  void finish() override {
    if (const std::exception_ptr error = inner_->exception()) std::rethrow_exception(error);
  }

 private:
  std::shared_ptr<State> state_;
  WorkPtr inner_;
  const char* operation_;
};

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

namespace {

// Tells the outgoing regions when this sender stops writing a streamed region, however send()
// leaves: until then a receiver's early refusal must not hand the region to another sender.
class StreamedWrite {
 public:
  StreamedWrite(OutgoingRegions& outgoing, int peer, std::uint64_t token)
      : outgoing_(outgoing), peer_(peer), token_(token) {}
  StreamedWrite(const StreamedWrite&) = delete;
  StreamedWrite& operator=(const StreamedWrite&) = delete;
  ~StreamedWrite() { outgoing_.finished_writing(peer_, token_); }

 private:
  OutgoingRegions& outgoing_;
  int peer_;
  std::uint64_t token_;
};

}  // namespace

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
        std::move(arrived), src, [state, message, tensor, tag](int source) { state->deliver(source, tag, message, tensor); },
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
      [state, frame, tensor, tag](int source) {
        if (frame->defined()) state->deliver(source, tag, *frame, tensor);
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
    state.incoming.progress();
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
  } else {
    state.take_region(received.source, frame, payload);
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
  return state_->memory->allocate(nbytes).storage;
}

void NodeLocalBackend::abort(const std::string& reason) {
  state_->aborted.raise(reason);
  control_->abort(reason);
}

}  // namespace tensortree::detail
