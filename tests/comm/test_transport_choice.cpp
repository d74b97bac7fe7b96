// Which transport carries a group's tensors, over described topologies (same node same GPU, same
// node two GPUs, two nodes, no CUDA): every member decides from the same placements and probe
// results, so the choice must depend on nothing else.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "comm/transport_choice.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;
using tensortree::detail::choose_cuda_transport;
using tensortree::detail::CudaTransportKind;
using tensortree::detail::PeerTransportKind;
using tensortree::detail::RankPlacement;

namespace {

RankPlacement on(std::uint64_t node, int gpu) {
  RankPlacement placement;
  placement.node = node;
  placement.probe = {static_cast<std::int32_t>(1000 + node), 7, node * 100};
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

TEST_CASE("placements carry the shared-memory probe's address") {
  RankPlacement member = on(7, 1);
  member.probe = {4242, 19, 0x1234567890abcdefULL};
  const auto encoded = detail::encode_placement(member);
  const std::vector<RankPlacement> decoded = detail::decode_placements(encoded);
  REQUIRE(decoded.size() == 1);
  CHECK(decoded[0].probe == member.probe);
}

namespace {

using Kinds = std::vector<PeerTransportKind>;
constexpr auto kMpi = PeerTransportKind::Mpi;
constexpr auto kShm = PeerTransportKind::SharedMemory;
constexpr auto kIpc = PeerTransportKind::CudaIpc;
constexpr auto kNccl = PeerTransportKind::Nccl;
constexpr auto kStaged = PeerTransportKind::Staged;

Kinds host(const std::vector<RankPlacement>& members, int rank, std::vector<std::uint8_t> mappable,
           HostTransport preference = HostTransport::Auto) {
  return detail::choose_host_transports(members, rank, mappable, preference);
}

Kinds cuda(const std::vector<RankPlacement>& members, int rank, bool nccl_built = true,
           CudaTransport preference = CudaTransport::Auto) {
  const CudaTransportKind collectives = choose_cuda_transport(members, nccl_built, preference).kind;
  return detail::choose_cuda_transports(members, rank, collectives, preference);
}

}  // namespace

TEST_CASE("host tensors: shared memory with the mappable ranks of this node, MPI with the own rank and the rest") {
  // Ranks 0, 1, 3 on node 7, rank 2 on node 9; rank 3 cannot be mapped.
  const std::vector<RankPlacement> members = {on(7, -1), on(7, -1), on(9, -1), on(7, -1)};
  CHECK(host(members, 0, {0, 1, 0, 0}) == Kinds{kMpi, kShm, kMpi, kMpi});
  CHECK(host(members, 1, {1, 0, 0, 0}) == Kinds{kShm, kMpi, kMpi, kMpi});
  CHECK(host(members, 2, {0, 0, 0, 0}) == Kinds{kMpi, kMpi, kMpi, kMpi});
  // A probe result for a rank of another node is ignored: only a node shares memory.
  CHECK(host(members, 0, {0, 1, 1, 0}) == Kinds{kMpi, kShm, kMpi, kMpi});
  // Forced MPI (the TCP test run), whatever maps.
  CHECK(host(members, 0, {0, 1, 0, 0}, HostTransport::Mpi) == Kinds{kMpi, kMpi, kMpi, kMpi});
  // Demanded shared memory that a pair of one node cannot map: InvalidArgument naming the pair.
  CHECK_THROWS_WITH(host(members, 0, {0, 1, 0, 0}, HostTransport::SharedMemory),
                    Catch::Contains("group ranks 0 and 3 run on one node and cannot map"));
  CHECK(host({on(7, -1), on(7, -1), on(9, -1)}, 1, {1, 0, 0}, HostTransport::SharedMemory) ==
        Kinds{kShm, kMpi, kMpi});
  CHECK_THROWS_AS(host(members, 0, {0, 1}), InvalidArgument);  // one result per member
}

TEST_CASE("the probe results count only where both ranks of a pair map each other") {
  // 3 members; row r is what rank r mapped. 0 and 1 map each other; 2 maps 0 but 0 not 2.
  const std::vector<std::uint8_t> rows = {0, 1, 0, /**/ 1, 0, 0, /**/ 1, 0, 0};
  const auto gathered = std::as_bytes(std::span(rows));
  CHECK(detail::mutually_mappable(gathered, 0, 3) == std::vector<std::uint8_t>{0, 1, 0});
  CHECK(detail::mutually_mappable(gathered, 2, 3) == std::vector<std::uint8_t>{0, 0, 0});
  CHECK_THROWS_AS(detail::mutually_mappable(gathered.first(8), 0, 3), CorruptData);
}

TEST_CASE("CUDA tensors, same node same GPU: CUDA IPC between those ranks, staging for the collectives") {
  const std::vector<RankPlacement> members = {on(7, 0), on(7, 0), on(7, 1)};
  CHECK(cuda(members, 0) == Kinds{kStaged, kIpc, kStaged});
  CHECK(cuda(members, 2) == Kinds{kStaged, kStaged, kStaged});
  CHECK(cuda({on(7, 0), on(7, 0), on(7, 0), on(7, 0)}, 3) == Kinds{kIpc, kIpc, kIpc, kStaged});
  // Staging demanded: no IPC either.
  CHECK(cuda(members, 0, true, CudaTransport::Staged) == Kinds{kStaged, kStaged, kStaged});
}

TEST_CASE("CUDA tensors, same node two GPUs or two nodes: NCCL between ranks, staging without it") {
  CHECK(cuda({on(7, 0), on(7, 1)}, 0) == Kinds{kStaged, kNccl});
  CHECK(cuda({on(7, 0), on(9, 0)}, 1) == Kinds{kNccl, kStaged});
  CHECK(cuda({on(7, 0), on(7, 1), on(9, 0)}, 1, true, CudaTransport::Nccl) == Kinds{kNccl, kStaged, kNccl});
  CHECK(cuda({on(7, 0), on(9, 0)}, 1, false) == Kinds{kStaged, kStaged});
  // The same GPU index on two nodes is two GPUs: no IPC between them.
  RankPlacement far = on(9, 0);
  far.gpu = on(7, 0).gpu;
  CHECK(cuda({on(7, 0), far}, 0, false) == Kinds{kStaged, kStaged});
}

TEST_CASE("CUDA tensors to the own rank: staging, which queues a send posted before its receive; NCCL does not") {
  CHECK(cuda({on(7, 0)}, 0) == Kinds{kStaged});
  CHECK(cuda({on(7, 0)}, 0, true, CudaTransport::Nccl) == Kinds{kStaged});
  CHECK(chosen({on(7, 0)}) == CudaTransportKind::Nccl);
}

TEST_CASE("no CUDA on a member: staging, no IPC") {
  CHECK(cuda({on(7, -1), on(7, -1)}, 0) == Kinds{kStaged, kStaged});
  CHECK(cuda({on(7, 0), on(7, -1)}, 0) == Kinds{kStaged, kStaged});
}
