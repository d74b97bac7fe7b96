#include "comm/transport_choice.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "comm/agreement.hpp"
#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown host";
  return name;
}

// Group ranks `a` and `b` share one GPU, when two members do.
struct SharedGpu {
  int a = -1;
  int b = -1;
};

SharedGpu first_shared_gpu(std::span<const RankPlacement> members) {
  for (std::size_t a = 0; a < members.size(); ++a) {
    for (std::size_t b = a + 1; b < members.size(); ++b) {
      if (share_gpu(members[a], members[b])) return {static_cast<int>(a), static_cast<int>(b)};
    }
  }
  return {};
}

}  // namespace

bool share_gpu(const RankPlacement& a, const RankPlacement& b) {
  return a.has_gpu && b.has_gpu && a.node == b.node && a.gpu == b.gpu;
}

RankPlacement this_placement() {
  RankPlacement placement;
  placement.node = Fingerprint().add(host_name()).value();
  if (cuda::device_count() > 0) {
    placement.gpu = cuda::device_uuid(cuda::current_device());
    placement.has_gpu = true;
  }
  placement.probe = probe_address();
  return placement;
}

// node 0..8, gpu 8..24, has_gpu 24, probe pid 28..32, fd 32..36, inode 40..48.
std::array<std::byte, kPlacementBytes> encode_placement(const RankPlacement& placement) {
  std::array<std::byte, kPlacementBytes> bytes{};
  std::memcpy(bytes.data(), &placement.node, sizeof placement.node);
  std::memcpy(bytes.data() + 8, placement.gpu.data(), placement.gpu.size());
  bytes[24] = std::byte{placement.has_gpu ? std::uint8_t{1} : std::uint8_t{0}};
  std::memcpy(bytes.data() + 28, &placement.probe.pid, 4);
  std::memcpy(bytes.data() + 32, &placement.probe.fd, 4);
  std::memcpy(bytes.data() + 40, &placement.probe.inode, 8);
  return bytes;
}

std::vector<RankPlacement> decode_placements(std::span<const std::byte> bytes) {
  if (bytes.size() % kPlacementBytes != 0) {
    throw CorruptData(fmt::format("placements of {} bytes: not a whole number of {}-byte records", bytes.size(),
                                  kPlacementBytes));
  }
  std::vector<RankPlacement> placements(bytes.size() / kPlacementBytes);
  for (std::size_t i = 0; i < placements.size(); ++i) {
    const std::byte* record = bytes.data() + i * kPlacementBytes;
    std::memcpy(&placements[i].node, record, sizeof placements[i].node);
    std::memcpy(placements[i].gpu.data(), record + 8, placements[i].gpu.size());
    const auto flag = std::to_integer<std::uint8_t>(record[24]);
    if (flag > 1) throw CorruptData(fmt::format("placement of rank {}: a GPU flag of {}", i, flag));
    placements[i].has_gpu = flag == 1;
    std::memcpy(&placements[i].probe.pid, record + 28, 4);
    std::memcpy(&placements[i].probe.fd, record + 32, 4);
    std::memcpy(&placements[i].probe.inode, record + 40, 8);
  }
  return placements;
}

bool any_shared_node(std::span<const RankPlacement> members) {
  std::vector<std::uint64_t> nodes;
  for (const RankPlacement& member : members) nodes.push_back(member.node);
  std::sort(nodes.begin(), nodes.end());
  return std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end();
}

std::vector<std::uint8_t> probe_peers(std::span<const RankPlacement> members, int rank) {
  std::vector<std::uint8_t> mapped(members.size(), 0);
  const RankPlacement& me = members[static_cast<std::size_t>(rank)];
  for (std::size_t peer = 0; peer < members.size(); ++peer) {
    if (static_cast<int>(peer) == rank || members[peer].node != me.node) continue;
    mapped[peer] = can_map(members[peer].probe) ? 1 : 0;
  }
  return mapped;
}

std::vector<std::uint8_t> mutually_mappable(std::span<const std::byte> gathered, int rank, int size) {
  const auto n = static_cast<std::size_t>(size);
  if (gathered.size() != n * n) {
    throw CorruptData(fmt::format("shared-memory probe results of {} bytes for {} members", gathered.size(), size));
  }
  const auto me = static_cast<std::size_t>(rank);
  std::vector<std::uint8_t> mutual(n, 0);
  for (std::size_t peer = 0; peer < n; ++peer) {
    const bool mine = gathered[me * n + peer] == std::byte{1};
    const bool theirs = gathered[peer * n + me] == std::byte{1};
    mutual[peer] = mine && theirs ? 1 : 0;
  }
  return mutual;
}

CudaTransportChoice choose_cuda_transport(std::span<const RankPlacement> members, bool nccl_built,
                                          CudaTransport preference) {
  if (preference == CudaTransport::Staged) {
    return {CudaTransportKind::Staged, "GroupOptions::cuda_transport asks for staging"};
  }
  std::string refusal;
  if (!nccl_built) {
    refusal = "the library was built without NCCL";
  } else if (const SharedGpu shared = first_shared_gpu(members); shared.a >= 0) {
    refusal = fmt::format("group ranks {} and {} share one GPU, which NCCL refuses", shared.a, shared.b);
  } else if (std::any_of(members.begin(), members.end(), [](const RankPlacement& m) { return !m.has_gpu; })) {
    refusal = "a member has no GPU";
  }
  if (refusal.empty()) return {CudaTransportKind::Nccl, "every member has a GPU of its own"};
  if (preference == CudaTransport::Nccl) {
    throw InvalidArgument(fmt::format("GroupOptions::cuda_transport asks for NCCL, but {}", refusal));
  }
  return {CudaTransportKind::Staged, refusal};
}

const char* transport_name(PeerTransportKind kind) {
  switch (kind) {
    case PeerTransportKind::Mpi: return "mpi";
    case PeerTransportKind::SharedMemory: return "shared memory";
    case PeerTransportKind::Nccl: return "nccl";
    case PeerTransportKind::Staged: return "staged";
    case PeerTransportKind::CudaIpc: return "cuda ipc";
  }
  return "unknown";
}

std::vector<PeerTransportKind> choose_host_transports(std::span<const RankPlacement> members, int rank,
                                                      std::span<const std::uint8_t> mappable,
                                                      HostTransport preference) {
  if (mappable.size() != members.size()) {
    throw InvalidArgument(fmt::format("choose_host_transports: {} mapping results for {} members", mappable.size(),
                                      members.size()));
  }
  std::vector<PeerTransportKind> kinds(members.size(), PeerTransportKind::Mpi);
  if (preference == HostTransport::Mpi) return kinds;
  const auto me = static_cast<std::size_t>(rank);
  for (std::size_t peer = 0; peer < members.size(); ++peer) {
    if (peer == me || members[peer].node != members[me].node) continue;
    if (mappable[peer] != 0) {
      kinds[peer] = PeerTransportKind::SharedMemory;
    } else if (preference == HostTransport::SharedMemory) {
      throw InvalidArgument(fmt::format("GroupOptions::host_transport asks for shared memory, but group ranks {} and "
                                        "{} run on one node and cannot map each other's memory (/proc/<pid>/fd is not "
                                        "open to them)", rank, peer));
    }
  }
  return kinds;
}

std::vector<PeerTransportKind> choose_cuda_transports(std::span<const RankPlacement> members, int rank,
                                                      CudaTransportKind collectives, CudaTransport preference) {
  const PeerTransportKind fallback =
      collectives == CudaTransportKind::Nccl ? PeerTransportKind::Nccl : PeerTransportKind::Staged;
  std::vector<PeerTransportKind> kinds(members.size(), fallback);
  const auto me = static_cast<std::size_t>(rank);
  // NCCL takes a send to the own rank only together with its receive in one group call; a send
  // posted alone (isend, then irecv) is an error there, while MPI under staging queues it.
  kinds[me] = PeerTransportKind::Staged;
  if (preference != CudaTransport::Auto) return kinds;
  for (std::size_t peer = 0; peer < members.size(); ++peer) {
    if (peer != me && share_gpu(members[me], members[peer])) kinds[peer] = PeerTransportKind::CudaIpc;
  }
  return kinds;
}

}  // namespace tensortree::detail
