// NodeLocalBackend: point-to-point traffic with peers on this node through shared memory, written
// once over ShareableMemory (host memfds or CUDA IPC). Each transfer is one frame on the existing
// host backend (`control`): small payloads travel inside it; larger ones stay in the sender's
// shared memory, the frame says where, the receiver copies them out once (its mapping of the
// peer's region cached) and acknowledges on kAckTag, so the sender knows when it may write that
// memory again.
// - A payload already in this transport's memory (a tree packed into allocate_message_buffer's
//   memory) is sent as it is, and the send completes when the receiver has copied it.
// - A region this transport allocated (a pooled copy's, a message buffer's) is freed once let go
//   and every peer that read it has closed its mapping at this rank's request or closed its end
//   (RegionRetirement): CUDA leaves freeing memory another process maps undefined.
// - Any other payload is copied into a pooled region first (a large one streamed: the frame goes
//   first and the receiver copies each piece out as soon as it is in), and the send completes when the frame
//   is out (like MPI's eager sends) while fewer than `max_pending` such copies (holding less than
//   `max_pending_bytes`) wait for the peer's acknowledgement; beyond that, the send is posted all
//   the same but completes when acknowledged (like MPI's rendezvous sends). Posting never waits.
// A PeerTransport only: the group gives it the peers on the node, other transports the rest and
// the collectives (whose waits take this transport's frames through progressing()). A receive from
// kAnySource matches frames and the plain messages of peers off the node alike, in order (both
// travel on `control`'s communicator); for CUDA memory it is supported only where every peer is
// node-local.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/abort_signal.hpp"
#include "transport/shm/imported_regions.hpp"
#include "transport/shm/outgoing_regions.hpp"
#include "transport/shm/shareable_memory.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

struct NodeLocalOptions {
  std::chrono::milliseconds timeout = std::chrono::minutes(10);  // the group's: bounds every wait
  std::uint64_t max_message_bytes = std::uint64_t{1} << 30;      // the group's: bounds recv_message
  std::size_t inline_bytes = std::size_t{8} << 10;               // payloads up to this travel in the frame
  // Copies of payloads larger than this are streamed in pieces of this size (0: never): the
  // receiver copies a piece out while the next goes in.
  std::size_t stream_chunk_bytes = std::size_t{128} << 10;
  // Copies per peer whose sends complete before the acknowledgement, in number and in bytes.
  // Four keep the sender's copy and the receiver's overlapping; more cycle more memory through the
  // caches for nothing (a stream of 4 MiB trees moved at 230 us each with 4, 265-520 us with 16).
  std::size_t max_pending = 4;
  std::size_t max_pending_bytes = std::size_t{256} << 20;
  // Free regions kept for the next copies: enough for streams of max_pending transfers to a few peers.
  std::size_t max_pooled_regions = 20;
  std::size_t max_pooled_bytes = std::size_t{256} << 20;
  std::size_t max_open_regions = 64;
};

class NodeLocalBackend final : public PeerTransport {
 public:
  // `local[r]` is 1 where group rank r is served through `memory`; InvalidArgument for an
  // operation with any other peer. `control` is the host transport frames and acknowledgements
  // travel on.
  NodeLocalBackend(std::shared_ptr<ShareableMemory> memory, std::shared_ptr<PeerTransport> control,
                   std::vector<std::uint8_t> local, NodeLocalOptions options);

  std::string_view name() const override { return name_; }
  TransportCapabilities capabilities() const override;
  int rank() const override { return control_->rank(); }
  int size() const override { return control_->size(); }

  WorkPtr send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr recv(const Tensor& tensor, int src, int tag) override;
  ReceivedMessage recv_message(int src, int tag) override;
  WorkPtr batch_p2p(std::span<const P2POp> ops) override;
  StoragePtr allocate_message_buffer(std::size_t nbytes, Device device) override;
  // The progress hook: while `work` (another transport's) waits, this rank still takes the frames
  // that reached the receives it had posted (a peer may wait on its send for that before it joins
  // a collective or sends on another transport).
  WorkPtr progressing(WorkPtr work, const char* operation) override;
  void abort(const std::string& reason) override;

  // What NodeLocalBackend's Works share with it (they may outlive it).
  struct State;

 private:
  bool is_local(int peer) const;
  // InvalidArgument unless `peer` is served here (node-local, or kAnySource).
  void require_local(int peer, const char* operation) const;

  std::shared_ptr<State> state_;
  std::shared_ptr<PeerTransport> control_;
  std::string name_;
};

}  // namespace tensortree::detail
