#include "transport/shm/outgoing_regions.hpp"

#include <string>
#include <utility>

#include "transport/shm/frame.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// Regions are sized up to a multiple of this, so that transfers of similar sizes share them.
constexpr std::size_t kRegionGranule = std::size_t{64} << 10;

std::size_t region_size(std::size_t nbytes) {
  return (nbytes + kRegionGranule - 1) / kRegionGranule * kRegionGranule;
}

}  // namespace

OutgoingRegions::OutgoingRegions(ShareableMemory& memory, Backend& control, int peers, std::size_t max_pooled)
    : memory_(memory), control_(control), max_pooled_(max_pooled), peers_(static_cast<std::size_t>(peers)) {}

ExportedRegion OutgoingRegions::take(std::size_t nbytes) {
  {
    const std::lock_guard lock(mutex_);
    // The smallest free region that fits and is not more than twice the need.
    const auto fit = pool_.lower_bound(nbytes);
    if (fit != pool_.end() && fit->first <= 2 * region_size(nbytes)) {
      ExportedRegion region = std::move(fit->second);
      pool_.erase(fit);
      return region;
    }
  }
  return memory_.allocate(region_size(nbytes));
}

std::uint64_t OutgoingRegions::expect_ack(int peer, ExportedRegion region, bool pooled) {
  Tensor bytes = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
  WorkPtr work = control_.recv(bytes, peer, kAckTag);
  const std::lock_guard lock(mutex_);
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  const std::uint64_t token = next_token_++;
  state.pending.emplace(token, Pending{std::move(region), pooled, false, false});
  state.receives.push_back({std::move(work), std::move(bytes)});
  return token;
}

void OutgoingRegions::collect(int peer) {
  const std::lock_guard lock(mutex_);
  collect_locked(peer);
}

// Acknowledgements name their transfer: the receiver may take frames in another order than sent.
void OutgoingRegions::collect_locked(int peer) {
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  while (!state.receives.empty() && state.receives.front().work->is_completed()) {
    const AckReceive done = std::move(state.receives.front());
    state.receives.pop_front();
    done.work->wait();  // rethrows a failed receive
    const auto* first = static_cast<const std::byte*>(done.bytes.data_ptr());
    const Ack ack = decode_ack({first, kAckBytes}, peer);
    const auto found = state.pending.find(ack.token);
    if (found == state.pending.end()) {
      throw CorruptData("node-local transport: rank " + std::to_string(peer) + " acknowledged transfer " +
                        std::to_string(ack.token) + ", which is not waiting for one");
    }
    found->second.acked = true;
    found->second.copied = ack.copied;
    if (found->second.pooled) {
      release_locked(found->second);
      state.pending.erase(found);
    }
  }
}

void OutgoingRegions::release_locked(Pending& pending) {
  if (pool_.size() >= max_pooled_) pool_.erase(pool_.begin());
  pool_.emplace(pending.region.storage->nbytes(), std::move(pending.region));
}

bool OutgoingRegions::acknowledged(int peer, std::uint64_t token) {
  const std::lock_guard lock(mutex_);
  collect_locked(peer);
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  const auto found = state.pending.find(token);
  if (found == state.pending.end() || !found->second.acked) return false;
  const bool copied = found->second.copied;
  state.pending.erase(found);
  if (!copied) {
    throw BackendError("node-local transport: rank " + std::to_string(peer) +
                       " could not read the shared memory of this send (its error says why)");
  }
  return true;
}

std::size_t OutgoingRegions::pending_copies(int peer) {
  const std::lock_guard lock(mutex_);
  collect_locked(peer);
  return peers_[static_cast<std::size_t>(peer)].pending.size();
}

}  // namespace tensortree::detail
