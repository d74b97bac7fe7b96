#include "transport/shm/outgoing_regions.hpp"

#include <chrono>
#include <iterator>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
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

OutgoingRegions::OutgoingRegions(ShareableMemory& memory, PeerTransport& control, int peers, std::size_t max_pooled,
                                 std::size_t max_pooled_bytes)
    : memory_(memory),
      control_(control),
      max_pooled_(max_pooled),
      max_pooled_bytes_(max_pooled_bytes),
      peers_(static_cast<std::size_t>(peers)) {
  pool_.reserve(max_pooled_ + 1);
}

OutgoingRegions::~OutgoingRegions() {
  // Acknowledgements come within microseconds of the receive; a peer that never sends one (it died,
  // or never received) costs at most this, once.
  constexpr auto kLongestDrain = std::chrono::seconds(2);
  const auto deadline = WaitClock::now() + kLongestDrain;
  for (Peer& peer : peers_) {
    for (AckReceive& receive : peer.receives) poll_until([&] { return receive.work->is_completed(); }, deadline);
  }
}

ExportedRegion OutgoingRegions::take(std::size_t nbytes) {
  {
    const std::lock_guard lock(mutex_);
    // The smallest free region that fits and is not more than twice the need; of equal ones the
    // most recently released, whose lines the caches are likeliest to hold still.
    const auto fits = [&](const ExportedRegion& region) {
      const std::size_t size = region.storage->nbytes();
      return size >= nbytes && size <= 2 * region_size(nbytes);
    };
    auto best = pool_.rend();
    for (auto it = pool_.rbegin(); it != pool_.rend(); ++it) {
      if (fits(*it) && (best == pool_.rend() || it->storage->nbytes() < best->storage->nbytes())) best = it;
    }
    if (best != pool_.rend()) {
      ExportedRegion region = std::move(*best);
      pooled_bytes_ -= region.storage->nbytes();
      pool_.erase(std::next(best).base());
      return region;
    }
  }
  return memory_.allocate(region_size(nbytes));
}

std::uint64_t OutgoingRegions::expect_ack(int peer, ExportedRegion region, Held held, bool being_written) {
  Tensor bytes = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
  WorkPtr work = control_.recv(bytes, peer, kAckTag);
  const std::lock_guard lock(mutex_);
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  const std::uint64_t token = next_token_++;
  if (held != Held::InPlace) {
    state.pending_copies += 1;
    state.pending_bytes += region.storage->nbytes();
  }
  state.pending.emplace(token, Pending{std::move(region), held, false, being_written});
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
      throw CorruptData(fmt::format("node-local transport: rank {} acknowledged transfer {}, which is not waiting for "
                                    "one", peer, ack.token));
    }
    found->second.acked = true;
    settle_locked(state, found);
  }
}

void OutgoingRegions::finished_writing(int peer, std::uint64_t token) {
  const std::lock_guard lock(mutex_);
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  const auto found = state.pending.find(token);
  if (found == state.pending.end()) return;
  found->second.being_written = false;
  settle_locked(state, found);
}

void OutgoingRegions::settle_locked(Peer& peer, std::map<std::uint64_t, Pending>::iterator transfer) {
  Pending& pending = transfer->second;
  if (!pending.acked || pending.being_written || pending.held == Held::InPlace || !pending.region.storage) return;
  release_locked(peer, pending);
  if (pending.held == Held::Copy) peer.pending.erase(transfer);
}

// Back to the pool, making room by dropping the least recently released regions: those are the
// ones the current traffic does not use. (Dropping the smallest instead kept the large regions of
// an earlier burst, which a smaller transfer may not take, and evicted each new small one at once:
// every later transfer then paid for a fresh memfd, its page faults and the receiver's mapping.)
void OutgoingRegions::release_locked(Peer& peer, Pending& pending) {
  const std::size_t nbytes = pending.region.storage->nbytes();
  peer.pending_copies -= 1;
  peer.pending_bytes -= nbytes;
  if (nbytes > max_pooled_bytes_ || max_pooled_ == 0) return;
  std::size_t dropped = 0;
  while (dropped < pool_.size() &&
         (pool_.size() - dropped >= max_pooled_ || pooled_bytes_ + nbytes > max_pooled_bytes_)) {
    pooled_bytes_ -= pool_[dropped].storage->nbytes();
    ++dropped;
  }
  pool_.erase(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(dropped));
  pooled_bytes_ += nbytes;
  pool_.push_back(std::move(pending.region));
}

bool OutgoingRegions::acknowledged(int peer, std::uint64_t token) {
  const std::lock_guard lock(mutex_);
  collect_locked(peer);
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  const auto found = state.pending.find(token);
  if (found == state.pending.end() || !found->second.acked) return false;
  // A refusal is the receiver's error, as a message MPI delivered but the receiver rejected: the
  // send itself succeeded.
  state.pending.erase(found);
  return true;
}

bool OutgoingRegions::within_allowance(int peer, std::size_t nbytes, std::size_t max_count, std::size_t max_bytes) {
  const std::lock_guard lock(mutex_);
  collect_locked(peer);
  const Peer& state = peers_[static_cast<std::size_t>(peer)];
  if (state.pending_copies == 0) return true;
  return state.pending_copies < max_count && state.pending_bytes + nbytes <= max_bytes;
}

}  // namespace tensortree::detail
