#include "transport/shm/outgoing_regions.hpp"

#include <iterator>
#include <map>
#include <string>
#include <utility>

#include "comm/abandoned_operations.hpp"
#include "core/text_format.hpp"
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
      peers_(static_cast<std::size_t>(peers)),
      retirement_(peers) {
  pool_.reserve(max_pooled_ + 1);
}

OutgoingRegions::~OutgoingRegions() {
  for (std::size_t index = 0; index < peers_.size(); ++index) {
    Peer& peer = peers_[index];
    try {
      collect_locked(static_cast<int>(index));  // what has arrived already
    } catch (...) {
      // A failed or corrupt acknowledgement: what it would have said stays unknown, so the
      // regions still waiting below stay held.
    }
    // Closed, the peer sends nothing more here: the receives left wait for frames it never took
    // and are cancelled with their Works (MPI completes a cancelled unmatched receive at once).
    if (peer.receives.empty() || peer.closed) continue;
    // The peer is still open (or its acknowledgements are late): it may yet take a frame and read
    // its region, so the regions it has not acknowledged stay allocated, with the receives that
    // will say when they are free. Nothing waits: a group's teardown costs no acknowledgement.
    std::map<std::uint64_t, ExportedRegion> unacknowledged;
    for (auto& [token, pending] : peer.pending) {
      if (!pending.acked && pending.region.storage) unacknowledged.emplace(token, std::move(pending.region));
    }
    // The retirement goes along: regions let go wait in it until this peer answers or closes.
    abandon_operation([peer_rank = static_cast<int>(index), receives = std::move(peer.receives),
                       requests = std::move(peer.release_requests), held = std::move(unacknowledged),
                       retirement = retirement_]() mutable noexcept {
      try {
        while (!receives.empty() && receives.front().work->is_completed()) {
          if (receives.front().work->exception()) return false;  // nothing more can be learned
          const auto* first = static_cast<const std::byte*>(receives.front().bytes.data_ptr());
          const Ack ack = decode_ack({first, kAckBytes}, peer_rank);
          receives.pop_front();
          if (ack.token == kClosingToken) {
            held.clear();  // every acknowledgement came before it: the rest were never taken
            retirement.peer_closed(peer_rank);
          } else if (ack.token == kReleasedToken) {
            retirement.released(peer_rank);
          } else {
            held.erase(ack.token);
          }
        }
        std::erase_if(requests, [](const WorkPtr& sent) { return sent->is_completed(); });
      } catch (...) {
        return false;
      }
      if (receives.empty()) held.clear();
      // Receives left after the closing match nothing more; their Works are kept rather than
      // destroyed here, where cancelling one may itself have to abandon it (not allowed here).
      return receives.empty() && requests.empty();
    });
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
  return allocate(region_size(nbytes));
}

ExportedRegion OutgoingRegions::allocate(std::size_t nbytes) {
  {
    const std::lock_guard lock(mutex_);
    for (std::size_t peer = 0; peer < peers_.size(); ++peer) {
      try {
        collect_locked(static_cast<int>(peer));
        request_releases_locked(static_cast<int>(peer));
      } catch (const Error&) {
        // That peer's own transfers report what went wrong with it; this allocation goes on.
      }
    }
  }
  ExportedRegion region = memory_.allocate(nbytes);
  retirement_.track(region);
  return region;
}

std::vector<int> OutgoingRegions::region_peers() {
  const std::lock_guard lock(mutex_);
  std::vector<int> peers;
  for (std::size_t peer = 0; peer < peers_.size(); ++peer) {
    if (peers_[peer].closing_expected) peers.push_back(static_cast<int>(peer));
  }
  return peers;
}

void OutgoingRegions::request_releases_locked(int peer) {
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  std::erase_if(state.release_requests, [](const WorkPtr& sent) { return sent->is_completed(); });
  const std::vector<RegionHandle> handles = retirement_.next_request(peer, kMaxReleaseHandles);
  if (handles.empty()) return;
  Tensor request = Tensor::empty({static_cast<std::int64_t>(kReleaseBytes)}, {DType::UInt8});
  encode_release(handles, static_cast<std::byte*>(request.data_ptr()));
  Tensor answer = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
  state.receives.push_back({control_.recv(answer, peer, kAckTag), answer});
  state.release_requests.push_back(control_.send(request, peer, kReleaseTag));
}

std::uint64_t OutgoingRegions::expect_ack(int peer, ExportedRegion region, Held held, bool being_written) {
  Tensor bytes = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
  // Posted under the lock: the receives are listed in the order they were posted, which is the
  // order the peer's acknowledgements complete them in.
  const std::lock_guard lock(mutex_);
  WorkPtr work = control_.recv(bytes, peer, kAckTag);
  Peer& state = peers_[static_cast<std::size_t>(peer)];
  const std::uint64_t token = next_token_++;
  retirement_.read_by(region.handle, peer);
  if (held != Held::InPlace) {
    state.pending_copies += 1;
    state.pending_bytes += region.storage->nbytes();
  }
  state.pending.emplace(token, Pending{std::move(region), held, false, being_written});
  state.receives.push_back({std::move(work), std::move(bytes)});
  // One more receive, once, for the peer's closing: a receiver that copied from this rank's
  // regions sends it when it closes, and every message on kAckTag needs a receive posted for it
  // (an unmatched one would outlive the communicator). Receives match in the order posted whatever
  // they carry, so this one may take an acknowledgement and a later one the closing.
  if (!state.closing_expected) {
    Tensor closing = Tensor::empty({static_cast<std::int64_t>(kAckBytes)}, {DType::UInt8});
    state.receives.push_back({control_.recv(closing, peer, kAckTag), closing});
    state.closing_expected = true;
  }
  return token;
}

void OutgoingRegions::collect(int peer) {
  const std::lock_guard lock(mutex_);
  collect_locked(peer);
  request_releases_locked(peer);
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
    if (ack.token == kClosingToken) {
      close_locked(state);
      retirement_.peer_closed(peer);
      continue;
    }
    if (ack.token == kReleasedToken) {
      retirement_.released(peer);
      continue;
    }
    const auto found = state.pending.find(ack.token);
    if (found == state.pending.end()) {
      throw CorruptData(fmt::format("node-local transport: rank {} acknowledged transfer {}, which is not waiting for "
                                    "one", peer, ack.token));
    }
    found->second.acked = true;
    settle_locked(state, found);
  }
}

void OutgoingRegions::close_locked(Peer& peer) {
  peer.closed = true;
  for (auto transfer = peer.pending.begin(); transfer != peer.pending.end();) {
    const auto current = transfer++;
    // Acknowledged before the closing (an in-place send whose Work has not looked yet): taken.
    if (current->second.acked) continue;
    current->second.acked = true;
    current->second.peer_closed = true;
    settle_locked(peer, current);  // a copy goes back to the pool: nobody reads it
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
  if (found->second.peer_closed) {
    state.pending.erase(found);
    throw BackendError(fmt::format("node-local transport: rank {} closed its end of the group without taking "
                                   "transfer {}", peer, token));
  }
  // A refusal is the receiver's error, as a message MPI delivered but the receiver rejected: the
  // send itself succeeded.
  state.pending.erase(found);
  return true;
}

bool OutgoingRegions::within_allowance(int peer, std::size_t nbytes, std::size_t max_count, std::size_t max_bytes) {
  const std::lock_guard lock(mutex_);
  collect_locked(peer);
  request_releases_locked(peer);
  const Peer& state = peers_[static_cast<std::size_t>(peer)];
  if (state.pending_copies == 0) return true;
  return state.pending_copies < max_count && state.pending_bytes + nbytes <= max_bytes;
}

}  // namespace tensortree::detail
