// ReleaseRequests: the receiver's side of RegionRetirement. A node-local peer may ask this rank to
// close its mappings of regions it has let go (kReleaseTag); each request is answered, once its
// mappings are closed, with kReleasedToken on kAckTag. A receive is kept posted for a peer from
// the first region frame of its this rank takes until the peer's closing (a request naming no
// region, sent when its group goes to every peer it sent region frames): every request has a
// receive to land in, and none stays posted for good. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/shm/imported_regions.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

class ReleaseRequests {
 public:
  ReleaseRequests(std::shared_ptr<PeerTransport> control, ImportedRegions& imported, int peers)
      : control_(std::move(control)), imported_(imported), receives_(static_cast<std::size_t>(peers)),
        closed_(static_cast<std::size_t>(peers)) {}
  ReleaseRequests(const ReleaseRequests&) = delete;
  ReleaseRequests& operator=(const ReleaseRequests&) = delete;
  // Waits for nothing: the receives of peers that have not closed yet stay in flight until their
  // closings come (requests landing meanwhile are taken and go unanswered).
  ~ReleaseRequests();

  // Posts the receive of `peer`'s requests, unless posted or the peer has closed.
  void expect_from(int peer);
  // Answers the requests that have arrived, and posts the next receives; returns at once if
  // another thread is doing it. CorruptData naming the peer for a malformed request.
  void answer();

  // Tells each of `peers` that this rank sends it no more requests (the closing).
  static void close(PeerTransport& control, const std::vector<int>& peers);

 private:
  struct Posted {
    WorkPtr work;
    Tensor bytes;
  };
  static Posted post(PeerTransport& control, int peer);

  std::shared_ptr<PeerTransport> control_;
  ImportedRegions& imported_;
  std::mutex mutex_;
  std::vector<Posted> receives_;  // by group rank; work null where none is posted
  std::vector<bool> closed_;      // by group rank: its closing came
};

}  // namespace tensortree::detail
