// Which transport carries a group's CUDA tensors, over described topologies: every member decides
// from the same placements, so the choice must depend on nothing else.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "comm/transport_choice.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;
using tensortree::detail::choose_cuda_transport;
using tensortree::detail::CudaTransportKind;
using tensortree::detail::RankPlacement;

namespace {

RankPlacement on(std::uint64_t node, int gpu) {
  RankPlacement placement;
  placement.node = node;
  if (gpu >= 0) {
    placement.gpu[0] = static_cast<std::byte>(gpu + 1);
    placement.gpu[15] = static_cast<std::byte>(0xa0 + gpu);
    placement.has_gpu = true;
  }
  return placement;
}

CudaTransportKind chosen(const std::vector<RankPlacement>& members, bool nccl_built = true,
                         CudaTransport preference = CudaTransport::Auto) {
  return choose_cuda_transport(members, nccl_built, preference).kind;
}

}  // namespace

TEST_CASE("one node, one GPU per rank: NCCL") {
  CHECK(chosen({on(7, 0), on(7, 1), on(7, 2)}) == CudaTransportKind::Nccl);
}

TEST_CASE("two nodes, GPU 0 on each: NCCL (the same index on two hosts is two GPUs)") {
  CHECK(chosen({on(7, 0), on(9, 0)}) == CudaTransportKind::Nccl);
}

TEST_CASE("ranks sharing one GPU: staged, naming the ranks; NCCL demanded is InvalidArgument") {
  const std::vector<RankPlacement> shared = {on(7, 0), on(7, 1), on(7, 0)};
  const auto choice = choose_cuda_transport(shared, true, CudaTransport::Auto);
  CHECK(choice.kind == CudaTransportKind::Staged);
  CHECK_THAT(choice.why, Catch::Contains("group ranks 0 and 2 share one GPU"));
  CHECK_THROWS_AS(choose_cuda_transport(shared, true, CudaTransport::Nccl), InvalidArgument);
  CHECK(chosen({on(7, 0), on(7, 0), on(7, 0), on(7, 0)}) == CudaTransportKind::Staged);
}

TEST_CASE("no NCCL in the build, or a member without a GPU: staged") {
  CHECK(chosen({on(7, 0), on(7, 1)}, false) == CudaTransportKind::Staged);
  CHECK_THROWS_WITH(choose_cuda_transport(std::vector{on(7, 0), on(7, 1)}, false, CudaTransport::Nccl),
                    Catch::Contains("built without NCCL"));
  CHECK(chosen({on(7, 0), on(7, -1)}) == CudaTransportKind::Staged);
}

TEST_CASE("staging asked for wins even where NCCL could serve") {
  CHECK(chosen({on(7, 0), on(9, 0)}, true, CudaTransport::Staged) == CudaTransportKind::Staged);
}

TEST_CASE("placements survive their encoding; a bad length or flag is CorruptData") {
  const std::vector<RankPlacement> members = {on(7, 0), on(9, 3), on(11, -1)};
  std::vector<std::byte> bytes;
  for (const RankPlacement& member : members) {
    const auto encoded = detail::encode_placement(member);
    bytes.insert(bytes.end(), encoded.begin(), encoded.end());
  }
  CHECK(detail::decode_placements(bytes) == members);
  CHECK_THROWS_AS(detail::decode_placements(std::span(bytes).first(bytes.size() - 1)), CorruptData);
  bytes[24] = std::byte{2};
  CHECK_THROWS_AS(detail::decode_placements(bytes), CorruptData);
}
