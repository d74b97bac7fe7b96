// What a NodeLocalBackend and its Works share (they may outlive the backend): the memory, the
// control transport, the outgoing and imported regions, the posted receives, and the steps of a
// transfer's receiving side (deliver a frame, take a region, acknowledge).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/abort_signal.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "transport/shm/frame.hpp"
#include "transport/shm/imported_regions.hpp"
#include "transport/shm/incoming_frames.hpp"
#include "transport/shm/node_local_backend.hpp"
#include "transport/shm/outgoing_regions.hpp"
#include "transport/shm/release_requests.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

struct NodeLocalBackend::State {
  State(std::shared_ptr<ShareableMemory> memory_in, std::shared_ptr<PeerTransport> control_in,
        std::vector<std::uint8_t> local_in, NodeLocalOptions options_in);
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  // Tells every peer whose region frames this rank acknowledged (copied or refused) that it reads
  // none of its regions again (kClosingToken), after its last acknowledgement to that peer: the
  // peer then frees the regions it still holds for frames this rank never took, instead of keeping
  // them for good. Only those peers: each posted a receive for the closing with its first region
  // frame, and a message on kAckTag that no receive takes would outlive the communicator. Nothing
  // is waited for.
  ~State();

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

  // What every wait of this transport's Works polls: the posted receives, and the peers' requests
  // to close mappings of regions they let go.
  void poll() {
    incoming.progress();
    releases.answer();
  }

  void acknowledge(int peer, std::uint64_t token, bool copied);

  // Takes a region frame's payload into `destination` and acknowledges it: now (null returned), or,
  // for a stream its sender is still writing, through the returned continuation, which later polls
  // run until the payload is all in. Whatever fails refuses the frame.
  IncomingFrames::Continuation take_region(int peer, const Frame& frame, const Tensor& destination);

  // "rank 1 received 7 elements from rank 0 (tag 77) into a tensor of 9 elements", as MPI says it.
  std::string wrong_length(int peer, int tag, std::uint64_t bytes, const Tensor& destination) const;

  // A buffer for a frame of `bytes` from the node-local `peer`, bounded before it is allocated.
  Tensor frame_buffer(int peer, std::uint64_t bytes) const;

  // A frame that arrived for `destination`: its payload moved there (and acknowledged), now or
  // through the continuation returned. `message` is the buffer the frame landed in, sized for the
  // frame this rank expected: a frame for another length may be shorter (MPI says nothing of that),
  // so its header alone is decoded, and a region frame of the wrong length is refused, acknowledged
  // all the same.
  IncomingFrames::Continuation deliver(int peer, int tag, const Tensor& message, const Tensor& destination);

  // A receive whose frame had another length than expected (MPI found it): a region frame is
  // refused, so that its sender does not wait for an acknowledgement that never comes, and the
  // error names the payload's length rather than the frame's.
  void explain_failed_receive(int peer, int tag, const Tensor& message, const Tensor& destination);

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
  ReleaseRequests releases;
  IncomingFrames incoming;
  AbortSignal aborted;
  // By group rank: whether this rank acknowledged a region frame of that peer's, whose first such
  // frame posted a receive for the closing this rank then sends it at the end.
  std::vector<std::atomic<bool>> acknowledged_to;

 private:
  // Runs `step` of taking `frame` from `peer`; what it throws refuses the frame first.
  template <class Step>
  auto refusing(int peer, const Frame& frame, Step&& step) -> decltype(step());
};

}  // namespace tensortree::detail
