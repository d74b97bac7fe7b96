#include "transport/shm/release_requests.hpp"

#include <exception>

#include "comm/abandoned_operations.hpp"
#include "transport/shm/frame.hpp"

namespace tensortree::detail {

ReleaseRequests::~ReleaseRequests() {
  for (Posted& posted : receives_) {
    if (!posted.work) continue;
    abandon_operation([work = std::move(posted.work), bytes = std::move(posted.bytes)]() noexcept {
      try {
        return work->is_completed();
      } catch (...) {
        return true;
      }
    });
  }
}

void ReleaseRequests::expect_from(int peer) {
  const std::lock_guard lock(mutex_);
  if (!receives_[static_cast<std::size_t>(peer)].work) post_locked(peer);
}

void ReleaseRequests::post_locked(int peer) {
  Posted& posted = receives_[static_cast<std::size_t>(peer)];
  posted.bytes = Tensor::empty({static_cast<std::int64_t>(kReleaseBytes)}, {DType::UInt8});
  posted.work = control_.recv(posted.bytes, peer, kReleaseTag);
}

void ReleaseRequests::answer() {
  const std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (std::size_t index = 0; index < receives_.size(); ++index) {
    Posted& posted = receives_[index];
    if (!posted.work || !posted.work->is_completed()) continue;
    const int peer = static_cast<int>(index);
    const Posted arrived = std::move(posted);
    post_locked(peer);  // before anything can throw: the peer may send its next request at once
    arrived.work->wait();  // rethrows a failed receive
    const auto* first = static_cast<const std::byte*>(arrived.bytes.data_ptr());
    for (const RegionHandle& handle : decode_release({first, kReleaseBytes}, peer)) imported_.forget(peer, handle);
    Tensor released = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
    encode_ack({kReleasedToken, true}, static_cast<std::byte*>(released.data_ptr()));
    control_.send(released, peer, kAckTag)->wait();
  }
}

}  // namespace tensortree::detail
