// OutgoingRegions: the sender's side of the node-local transport. Regions it copied payloads into
// wait here, per peer, for the receiver's acknowledgement, then go back to a small pool for the next
// transfer (so a steady stream allocates nothing); sends from memory that was exported as it is
// wait here for theirs before their Work completes. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/shm/shareable_memory.hpp"
#include "tensortree/backend.hpp"

namespace tensortree::detail {

class OutgoingRegions {
 public:
  // `control` carries the acknowledgements (kAckTag); `max_pooled` free regions are kept.
  OutgoingRegions(ShareableMemory& memory, Backend& control, int peers, std::size_t max_pooled);

  // A free region of at least `nbytes`, from the pool or new.
  ExportedRegion take(std::size_t nbytes);
  // Records a transfer from `region` to `peer` that waits for its acknowledgement, and posts the
  // receive of that acknowledgement; the token goes into the frame. `pooled`: the region returns
  // to the pool once acknowledged (a copy); otherwise it is the caller's memory.
  std::uint64_t expect_ack(int peer, ExportedRegion region, bool pooled);

  // Takes in every acknowledgement from `peer` that has arrived. Rethrows a failed receive of one.
  void collect(int peer);
  // Whether the transfer `token` to `peer` was acknowledged (collecting first); BackendError when
  // the receiver refused it. True once for each token: the record is dropped.
  bool acknowledged(int peer, std::uint64_t token);
  // Copies to `peer` still waiting for their acknowledgement.
  std::size_t pending_copies(int peer);

 private:
  struct Pending {
    ExportedRegion region;
    bool pooled = false;
    bool acked = false;
    bool copied = false;
  };
  struct AckReceive {
    WorkPtr work;
    Tensor bytes;
  };
  struct Peer {
    std::deque<AckReceive> receives;
    std::map<std::uint64_t, Pending> pending;
  };

  void collect_locked(int peer);
  void release_locked(Pending& pending);

  ShareableMemory& memory_;
  Backend& control_;
  std::size_t max_pooled_;
  std::mutex mutex_;
  std::vector<Peer> peers_;
  std::multimap<std::size_t, ExportedRegion> pool_;
  std::uint64_t next_token_ = 1;
};

}  // namespace tensortree::detail
