#include "comm/transport_choice.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "comm/agreement.hpp"
#include "core/cuda_api.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

constexpr std::size_t kPlacementBytes = 32;

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
      if (members[a].has_gpu && members[a] == members[b]) return {static_cast<int>(a), static_cast<int>(b)};
    }
  }
  return {};
}

}  // namespace

RankPlacement this_placement() {
  RankPlacement placement;
  placement.node = Fingerprint().add(host_name()).value();
  if (cuda::device_count() > 0) {
    placement.gpu = cuda::device_uuid(cuda::current_device());
    placement.has_gpu = true;
  }
  return placement;
}

std::array<std::byte, 32> encode_placement(const RankPlacement& placement) {
  std::array<std::byte, kPlacementBytes> bytes{};
  std::memcpy(bytes.data(), &placement.node, sizeof placement.node);
  std::memcpy(bytes.data() + 8, placement.gpu.data(), placement.gpu.size());
  bytes[24] = std::byte{placement.has_gpu ? std::uint8_t{1} : std::uint8_t{0}};
  return bytes;
}

std::vector<RankPlacement> decode_placements(std::span<const std::byte> bytes) {
  if (bytes.size() % kPlacementBytes != 0) {
    throw CorruptData("placements of " + std::to_string(bytes.size()) + " bytes: not a whole number of " +
                      std::to_string(kPlacementBytes) + "-byte records");
  }
  std::vector<RankPlacement> placements(bytes.size() / kPlacementBytes);
  for (std::size_t i = 0; i < placements.size(); ++i) {
    const std::byte* record = bytes.data() + i * kPlacementBytes;
    std::memcpy(&placements[i].node, record, sizeof placements[i].node);
    std::memcpy(placements[i].gpu.data(), record + 8, placements[i].gpu.size());
    const auto flag = std::to_integer<std::uint8_t>(record[24]);
    if (flag > 1) throw CorruptData("placement of rank " + std::to_string(i) + ": a GPU flag of " + std::to_string(flag));
    placements[i].has_gpu = flag == 1;
  }
  return placements;
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
    refusal = "group ranks " + std::to_string(shared.a) + " and " + std::to_string(shared.b) +
              " share one GPU, which NCCL refuses";
  } else if (std::any_of(members.begin(), members.end(), [](const RankPlacement& m) { return !m.has_gpu; })) {
    refusal = "a member has no GPU";
  }
  if (refusal.empty()) return {CudaTransportKind::Nccl, "every member has a GPU of its own"};
  if (preference == CudaTransport::Nccl) {
    throw InvalidArgument("GroupOptions::cuda_transport asks for NCCL, but " + refusal);
  }
  return {CudaTransportKind::Staged, refusal};
}

}  // namespace tensortree::detail
