// Which transport carries a group's tensors, decided alike on every member from facts they all
// hold: where each member runs (its node and the GPU it is bound to, shared when the group is
// made), which pairs can map each other's memory, and what the build and the options allow.
// - Collectives of CUDA tensors: NCCL where it serves the group. NCCL (2.28) refuses a
//   communicator with two ranks on one GPU ("Duplicate GPU detected"), so such a group stages
//   through pinned host memory over MPI instead; so does a build without NCCL, or a group told to.
// - Point to point, per pair: shared memory for host tensors between members of one node, CUDA
//   IPC for CUDA tensors between members bound to one GPU, the collectives' transport otherwise.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/shared_file.hpp"
#include "tensortree/group.hpp"

namespace tensortree::detail {

// Where one member runs, as its peers see it.
struct RankPlacement {
  std::uint64_t node = 0;          // the same on every rank of one host (a hash of its name)
  std::array<std::byte, 16> gpu{};  // the UUID of the GPU it is bound to
  bool has_gpu = false;
  SharedFileAddress probe;  // the process's shared-memory probe, for peers on its node to try

  bool operator==(const RankPlacement&) const = default;
};

// Both run on one node, bound to one GPU.
bool share_gpu(const RankPlacement& a, const RankPlacement& b);

// This process: the host's name, the current CUDA device, if any, and its probe.
RankPlacement this_placement();

// Fixed-size bytes for the bootstrap's all_gather, and back (CorruptData on a wrong length).
inline constexpr std::size_t kPlacementBytes = 48;
std::array<std::byte, kPlacementBytes> encode_placement(const RankPlacement& placement);
std::vector<RankPlacement> decode_placements(std::span<const std::byte> bytes);

// Whether any two members run on one node (then they find out which pairs can map each other's
// memory, a second round).
bool any_shared_node(std::span<const RankPlacement> members);
// Which members group rank `rank` can map the probes of: 1 for each member on its node whose probe
// maps, 0 for the others and for itself.
std::vector<std::uint8_t> probe_peers(std::span<const RankPlacement> members, int rank);
// Pairs that can map each other, from every member's probe_peers result in rank order: entry r is
// 1 when `rank` maps r's memory and r maps `rank`'s. CorruptData on a wrong length.
std::vector<std::uint8_t> mutually_mappable(std::span<const std::byte> gathered, int rank, int size);

enum class CudaTransportKind : unsigned char { Nccl, Staged };

// What serves one pair of members.
enum class PeerTransportKind : unsigned char { Mpi, SharedMemory, Nccl, Staged, CudaIpc };
const char* transport_name(PeerTransportKind kind);

struct CudaTransportChoice {
  CudaTransportKind kind;
  std::string why;  // for errors and logs: what decided it
};

// The transport for the group whose members run at `members`. InvalidArgument when `preference`
// demands NCCL where it cannot serve (not built, or two members on one GPU).
CudaTransportChoice choose_cuda_transport(std::span<const RankPlacement> members, bool nccl_built,
                                          CudaTransport preference);

// The transport of host tensors between group rank `rank` and each member, by group rank.
// `mappable[r]` says whether this rank and member r can map each other's shared memory (both
// ways; the probe that finds out runs only between members of one node). The own rank's entry is
// MPI. InvalidArgument when `preference` demands shared memory that a pair on one node cannot map.
std::vector<PeerTransportKind> choose_host_transports(std::span<const RankPlacement> members, int rank,
                                                      std::span<const std::uint8_t> mappable,
                                                      HostTransport preference);

// The transport of CUDA tensors between group rank `rank` and each member: CUDA IPC with members
// bound to the same GPU (unless `preference` names one transport for everything), `collectives`
// otherwise; staging with the own rank, whatever serves the rest.
std::vector<PeerTransportKind> choose_cuda_transports(std::span<const RankPlacement> members, int rank,
                                                      CudaTransportKind collectives, CudaTransport preference);

}  // namespace tensortree::detail
