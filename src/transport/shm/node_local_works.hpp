// The Works a NodeLocalBackend returns, and the guard of a streamed write: each holds the shared
// State, so that it may outlive the backend.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/shm/node_local_state.hpp"

namespace tensortree::detail {

// A send complete once the receiver acknowledged it: from memory the receiver reads in place
// (`payload`, kept until then), or a copy beyond the peer's allowance (`payload` undefined).
class AwaitAck final : public Work {
 public:
  AwaitAck(std::shared_ptr<NodeLocalBackend::State> state, int peer, std::uint64_t token, WorkPtr frame_sent,
           Tensor payload);
  AwaitAck(const AwaitAck&) = delete;
  AwaitAck& operator=(const AwaitAck&) = delete;
  // The receiver may still be reading the payload: it is kept until the acknowledgement comes.
  ~AwaitAck() override;

 protected:
  bool test() override;
  void block() override;

 private:
  std::shared_ptr<NodeLocalBackend::State> state_;
  int peer_;
  std::uint64_t token_;
  WorkPtr frame_sent_;
  Tensor payload_;
  bool acked_ = false;
};

// A receive through IncomingFrames: complete once any poll of the backend's Works settled it.
class FrameReceive final : public Work {
 public:
  FrameReceive(std::shared_ptr<NodeLocalBackend::State> state, std::shared_ptr<const IncomingFrames::Receive> receive,
               int peer);
  FrameReceive(const FrameReceive&) = delete;
  FrameReceive& operator=(const FrameReceive&) = delete;
  // A frame that already arrived is taken, its payload to the end if it is streaming (MPI would
  // have put it in the buffer too); otherwise the receive is cancelled with the record.
  ~FrameReceive() override;

  int source_rank() const override;

 protected:
  bool test() override;
  void block() override;
  void finish() override;

 private:
  std::shared_ptr<NodeLocalBackend::State> state_;
  std::shared_ptr<const IncomingFrames::Receive> receive_;
  int peer_;
};

// Another transport's operation that settles the frame receives whenever it is polled.
class Progressing final : public Work {
 public:
  Progressing(std::shared_ptr<NodeLocalBackend::State> state, WorkPtr inner, const char* operation)
      : state_(std::move(state)), inner_(std::move(inner)), operation_(operation) {}

  int source_rank() const override { return inner_->source_rank(); }

 protected:
  bool test() override;
  void block() override;
  void finish() override;

 private:
  std::shared_ptr<NodeLocalBackend::State> state_;
  WorkPtr inner_;
  const char* operation_;
};

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

}  // namespace tensortree::detail
