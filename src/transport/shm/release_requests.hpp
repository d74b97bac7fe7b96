// ReleaseRequests: the receiver's side of RegionRetirement. A peer whose region frames this rank
// takes may later ask it to close its mappings of regions it has let go (kReleaseTag); each request
// is answered, once its mappings are closed, with kReleasedToken on kAckTag. A receive for the next
// request is posted from the first region frame on, so that every request has one to land in.
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "transport/shm/imported_regions.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree::detail {

class ReleaseRequests {
 public:
  ReleaseRequests(PeerTransport& control, ImportedRegions& imported, int peers)
      : control_(control), imported_(imported), receives_(static_cast<std::size_t>(peers)) {}
  ReleaseRequests(const ReleaseRequests&) = delete;
  ReleaseRequests& operator=(const ReleaseRequests&) = delete;
  // Waits for nothing: a receive still posted stays in flight (a request that the peer sent before
  // it learnt of this rank's closing lands in it), answered by no one.
  ~ReleaseRequests();

  // Posts the receive of `peer`'s release requests, if not yet posted.
  void expect_from(int peer);
  // Answers the requests that have arrived, and posts the next receives; returns at once if
  // another thread is doing it. CorruptData naming the peer for a malformed request.
  void answer();

 private:
  struct Posted {
    WorkPtr work;
    Tensor bytes;
  };
  void post_locked(int peer);

  PeerTransport& control_;
  ImportedRegions& imported_;
  std::mutex mutex_;
  std::vector<Posted> receives_;  // by group rank; work null until posted
};

}  // namespace tensortree::detail
