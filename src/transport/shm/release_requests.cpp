#include "transport/shm/release_requests.hpp"

#include <exception>

#include "comm/abandoned_operations.hpp"
#include "transport/shm/frame.hpp"

namespace tensortree::detail {

namespace {

std::vector<RegionHandle> decoded(const Tensor& bytes, int peer) {
  return decode_release({static_cast<const std::byte*>(bytes.data_ptr()), kReleaseBytes}, peer);
}

}  // namespace

void ReleaseRequests::expect_from(int peer) {
  const std::lock_guard lock(mutex_);
  const auto index = static_cast<std::size_t>(peer);
  if (!receives_[index].work && !closed_[index]) receives_[index] = post(*control_, peer);
}

ReleaseRequests::~ReleaseRequests() {
  for (std::size_t index = 0; index < receives_.size(); ++index) {
    if (!receives_[index].work) continue;
    // The transport is not kept alive for this (it holds the group's communicator): once it has
    // gone, a request that lands is the last this rank takes.
    abandon_operation([control = std::weak_ptr<PeerTransport>(control_), peer = static_cast<int>(index),
                       posted = std::move(receives_[index])]() mutable noexcept {
      try {
        while (posted.work->is_completed()) {
          posted.work->wait();
          if (decoded(posted.bytes, peer).empty()) return true;  // the closing: nothing follows
          const std::shared_ptr<PeerTransport> transport = control.lock();
          if (!transport) return true;
          posted = post(*transport, peer);
        }
        return false;
      } catch (...) {
        return true;  // the peer's messages cannot be taken any more
      }
    });
  }
}

ReleaseRequests::Posted ReleaseRequests::post(PeerTransport& control, int peer) {
  Posted posted;
  posted.bytes = Tensor::empty({static_cast<std::int64_t>(kReleaseBytes)}, {DType::UInt8});
  posted.work = control.recv(posted.bytes, peer, kReleaseTag);
  return posted;
}

void ReleaseRequests::answer() {
  const std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (std::size_t index = 0; index < receives_.size(); ++index) {
    Posted& posted = receives_[index];
    if (!posted.work || !posted.work->is_completed()) continue;
    const int peer = static_cast<int>(index);
    const Posted arrived = std::move(posted);
    posted = {};
    arrived.work->wait();  // rethrows a failed receive
    const std::vector<RegionHandle> handles = decoded(arrived.bytes, peer);
    if (handles.empty()) {  // the peer's closing: it asks nothing more
      closed_[index] = true;
      continue;
    }
    posted = post(*control_, peer);  // before the answer: the peer may send its next request at once
    for (const RegionHandle& handle : handles) imported_.forget(peer, handle);
    Tensor released = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
    encode_ack({kReleasedToken, true}, static_cast<std::byte*>(released.data_ptr()));
    control_->send(released, peer, kAckTag)->wait();
  }
}

void ReleaseRequests::close(PeerTransport& control, const std::vector<int>& peers) {
  for (const int peer : peers) {
    try {
      Tensor closing = Tensor::empty({static_cast<std::int64_t>(kReleaseBytes)}, {DType::UInt8});
      encode_release({}, static_cast<std::byte*>(closing.data_ptr()));
      abandon_unless_completed(control.send(closing, peer, kReleaseTag));
    } catch (...) {
      // The control transport failed: the peer's receive stays posted (a bounded leak).
    }
  }
}

}  // namespace tensortree::detail
