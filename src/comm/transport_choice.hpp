// Which transport carries a group's CUDA tensors, decided alike on every member from facts they
// all hold: where each member runs (its node and the GPU it is bound to, shared when the group is
// made) and what the build and the options allow. NCCL (2.28) refuses a communicator with two
// ranks on one GPU ("Duplicate GPU detected"), so such a group stages through pinned host memory
// over MPI instead; so does a build without NCCL, or a group told to.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensortree/group.hpp"

namespace tensortree::detail {

// Where one member runs, as its peers see it.
struct RankPlacement {
  std::uint64_t node = 0;          // the same on every rank of one host (a hash of its name)
  std::array<std::byte, 16> gpu{};  // the UUID of the GPU it is bound to
  bool has_gpu = false;

  bool operator==(const RankPlacement&) const = default;
};

// This process: the host's name and the current CUDA device, if any.
RankPlacement this_placement();

// Fixed-size bytes for the bootstrap's all_gather, and back (CorruptData on a wrong length).
std::array<std::byte, 32> encode_placement(const RankPlacement& placement);
std::vector<RankPlacement> decode_placements(std::span<const std::byte> bytes);

enum class CudaTransportKind : unsigned char { Nccl, Staged };

struct CudaTransportChoice {
  CudaTransportKind kind;
  std::string why;  // for errors and logs: what decided it
};

// The transport for the group whose members run at `members`. InvalidArgument when `preference`
// demands NCCL where it cannot serve (not built, or two members on one GPU).
CudaTransportChoice choose_cuda_transport(std::span<const RankPlacement> members, bool nccl_built,
                                          CudaTransport preference);

}  // namespace tensortree::detail
