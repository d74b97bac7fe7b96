#include "transport/shm/node_local_works.hpp"

#include <exception>
#include <thread>
#include <utility>

#include "comm/abandoned_operations.hpp"

namespace tensortree::detail {

AwaitAck::AwaitAck(std::shared_ptr<NodeLocalBackend::State> state, int peer, std::uint64_t token, WorkPtr frame_sent,
                   Tensor payload)
    : state_(std::move(state)), peer_(peer), token_(token), frame_sent_(std::move(frame_sent)),
      payload_(std::move(payload)) {}

AwaitAck::~AwaitAck() {
  if (acked_) return;
  abandon_operation([state = state_, peer = peer_, token = token_, payload = payload_]() noexcept {
    try {
      return state->outgoing.acknowledged(peer, token);
    } catch (...) {
      return true;  // refused, or the acknowledgement cannot come: nothing reads the payload
    }
  });
}

bool AwaitAck::test() {
  state_->poll();  // the peer may be waiting for this rank's acknowledgements too
  if (!frame_sent_->is_completed()) return false;
  if (const std::exception_ptr error = frame_sent_->exception()) {
    acked_ = true;  // the frame never left: nobody reads the payload
    std::rethrow_exception(error);
  }
  if (!acked_) acked_ = state_->outgoing.acknowledged(peer_, token_);
  return acked_;
}

void AwaitAck::block() {
  state_->wait_for(fmt::format("send to rank {} (waiting for it to take the shared memory)", peer_),
                   [this] { return test(); });
}

FrameReceive::FrameReceive(std::shared_ptr<NodeLocalBackend::State> state,
                           std::shared_ptr<const IncomingFrames::Receive> receive, int peer)
    : state_(std::move(state)), receive_(std::move(receive)), peer_(peer) {}

FrameReceive::~FrameReceive() {
  if (receive_->settled()) return;
  state_->incoming.progress();
  // A stream ends within its deadline, copied or failed: waiting for it is bounded.
  while (!receive_->settled() && receive_->delivering()) {
    std::this_thread::yield();
    state_->incoming.progress();
  }
}

int FrameReceive::source_rank() const {
  if (peer_ != kAnySource || !receive_->settled()) return Work::source_rank();
  return receive_->source();
}

bool FrameReceive::test() {
  state_->poll();
  return receive_->settled();
}

void FrameReceive::block() {
  state_->wait_for(peer_ == kAnySource ? "recv with any rank" : fmt::format("recv with rank {}", peer_),
                   [this] { return test(); });
}

void FrameReceive::finish() {
  if (const std::exception_ptr error = receive_->error()) std::rethrow_exception(error);
}

bool Progressing::test() {
  state_->poll();
  return inner_->is_completed();
}

void Progressing::block() { state_->wait_for(operation_, [this] { return test(); }); }

void Progressing::finish() {
  if (const std::exception_ptr error = inner_->exception()) std::rethrow_exception(error);
}

}  // namespace tensortree::detail
