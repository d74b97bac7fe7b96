// OutgoingRegions: the sender's side of the node-local transport. Regions it copied payloads into
// wait here, per peer, for the receiver's acknowledgement, then go back to a small pool for the next
// transfer (so a steady stream allocates nothing); sends from memory that was exported as it is
// wait here for theirs before their Work completes. Regions it allocates are freed through
// RegionRetirement once let go: the peers that read them are asked to close their mappings first.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/shm/region_retirement.hpp"
#include "transport/shm/shareable_memory.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

class OutgoingRegions {
 public:
  // `control` carries the acknowledgements (kAckTag); free regions are kept up to `max_pooled` of
  // them and `max_pooled_bytes` together, the least recently used going first.
  OutgoingRegions(ShareableMemory& memory, PeerTransport& control, int peers, std::size_t max_pooled,
                  std::size_t max_pooled_bytes);
  OutgoingRegions(const OutgoingRegions&) = delete;
  OutgoingRegions& operator=(const OutgoingRegions&) = delete;
  // Waits for nothing. The acknowledgement receives still posted are neither cancelled nor
  // waited for: one that arrived after its receive was cancelled would reach the communicator after
  // it is freed, where MPI may reuse its id for a later group, out of sequence there; and a peer
  // that never took a frame never acknowledges it. Where a peer has closed (kClosingToken) they
  // match nothing more and go; elsewhere they are left in flight (comm/abandoned_operations.hpp),
  // holding the regions still unacknowledged, which a live peer may yet read, until the peer's
  // acknowledgements and its closing come.
  ~OutgoingRegions();

  // A free region of at least `nbytes`, from the pool or new.
  ExportedRegion take(std::size_t nbytes);
  // A new region of `nbytes`, freed through the retirement once let go. First asks the peers for
  // the regions let go since, so that a sender that allocates and drops regions frees them as fast
  // as its peers answer.
  ExportedRegion allocate(std::size_t nbytes);
  // The peers this rank sent region frames to (each may be asked to release them).
  std::vector<int> region_peers();
  // How a transfer's region is held until the receiver acknowledges it.
  enum class Held {
    InPlace,      // the caller's memory, read where it is; its Work asks acknowledged()
    Copy,         // a pooled copy whose send completed at once; back to the pool when acknowledged
    AwaitedCopy,  // a pooled copy beyond the peer's allowance; back to the pool, and its Work asks
  };
  // Records a transfer from `region` to `peer` that waits for its acknowledgement, and posts the
  // receive of that acknowledgement; the token goes into the frame. A region still `being_written`
  // (a streamed payload, copied in after its frame went out) stays out of the pool until
  // finished_writing, even once acknowledged: a receiver may refuse the frame before the copy ends.
  std::uint64_t expect_ack(int peer, ExportedRegion region, Held held, bool being_written = false);
  // The sender has stopped writing the region of transfer `token` to `peer`, done or failed.
  void finished_writing(int peer, std::uint64_t token);

  // Takes in every acknowledgement from `peer` that has arrived. Rethrows a failed receive of one.
  void collect(int peer);
  // Whether the transfer `token` to `peer` (InPlace or AwaitedCopy) was acknowledged, copied or
  // refused (collecting first). True once for each token: the record is dropped. BackendError when
  // the peer closed without taking it.
  bool acknowledged(int peer, std::uint64_t token);
  // Whether one more copy of `nbytes` to `peer` may complete its send at once: fewer than
  // `max_count` copies, holding fewer than `max_bytes` together, wait for its acknowledgements
  // (collecting first). One copy always may, however large.
  bool within_allowance(int peer, std::size_t nbytes, std::size_t max_count, std::size_t max_bytes);

 private:
  struct Pending {
    ExportedRegion region;
    Held held = Held::InPlace;
    bool acked = false;
    bool being_written = false;
    bool peer_closed = false;  // never taken: the peer closed first
  };
  struct AckReceive {
    WorkPtr work;
    Tensor bytes;
  };
  struct Peer {
    std::deque<AckReceive> receives;
    std::deque<WorkPtr> release_requests;  // sent; kept until complete
    std::map<std::uint64_t, Pending> pending;
    std::size_t pending_copies = 0;
    std::size_t pending_bytes = 0;
    // Receives posted for the peer's closing acknowledgement (one, with the first transfer), and
    // whether it came.
    bool closing_expected = false;
    bool closed = false;
  };

  void collect_locked(int peer);
  // Asks `peer` to close its mappings of the regions let go since its last answer (one request in
  // flight at a time), posting the receive of its answer.
  void request_releases_locked(int peer);
  // The peer closed: its transfers still unacknowledged were never taken.
  void close_locked(Peer& peer);
  // A copy acknowledged and no longer written goes back to the pool (a Copy's record with it:
  // nobody asks after it).
  void settle_locked(Peer& peer, std::map<std::uint64_t, Pending>::iterator transfer);
  void release_locked(Peer& peer, Pending& pending);

  ShareableMemory& memory_;
  PeerTransport& control_;
  std::size_t max_pooled_;
  std::size_t max_pooled_bytes_;
  std::size_t pooled_bytes_ = 0;
  std::mutex mutex_;
  std::vector<Peer> peers_;
  RegionRetirement retirement_;
  // Free regions, the least recently released first (reserved: releasing allocates nothing).
  std::vector<ExportedRegion> pool_;
  std::uint64_t next_token_ = 1;
};

}  // namespace tensortree::detail
