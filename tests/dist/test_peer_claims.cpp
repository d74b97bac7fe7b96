// Bounded peer claims (GroupOptions::max_message_bytes): every size a peer's bytes claim is
// overflow-checked and bounded before anything is allocated. A hostile rank writes the claims by
// hand (a schema of a huge but consistent tree, a broadcast announcement of 2^60 bytes, a shape
// header of 2^40 bytes, an object size of 2^60) and sends nothing after them, so that every rank
// finishes: each receiver gets CorruptData naming the rank, the bytes claimed and the limit.
// Lowering the limit refuses a normal tree; a limit above its size lets it through intact.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "comm/dist_internal.hpp"
#include "ops_test_support.hpp"
#include "scoped_env.hpp"
#include "tensortree/dist_objects.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"
#include "transport/mpi/mpi_backend.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

constexpr std::uint64_t kDefaultLimit = std::uint64_t{1} << 30;

Tensor bytes_tensor(const std::vector<std::byte>& bytes) {
  Tensor out = Tensor::empty({static_cast<std::int64_t>(bytes.size())}, {DType::UInt8});
  std::copy(bytes.begin(), bytes.end(), static_cast<std::byte*>(out.data_ptr()));
  return out;
}

// A consistent schema (Schema::decode accepts it) of uint8 leaves of the given lengths: nothing
// is allocated for it.
Schema schema_of_leaves(const std::vector<std::int64_t>& lengths) {
  std::vector<LeafPlan> leaves;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    keys.push_back("leaf" + std::to_string(i));
    leaves.push_back({{keys.back()}, DType::UInt8, {lengths[i]}});
  }
  return Schema::plan({{{}, {}, keys}}, leaves, DeviceType::CPU);
}

// A normal tree of `elements` float32 values and int64 counters, every value distinct per rank.
TensorTree tree_of(int rank, std::int64_t elements) {
  Tensor values = Tensor::empty({elements}, {DType::Float32});
  Tensor counters = Tensor::empty({elements / 4}, {DType::Int64});
  for (std::int64_t i = 0; i < elements; ++i) values.data<float>()[i] = static_cast<float>(rank_value(rank, i));
  for (std::int64_t i = 0; i < elements / 4; ++i) counters.data<std::int64_t>()[i] = 1000 * (rank + 1) + i;
  TensorTree tree;
  tree.set(Path{"values"}, values);
  tree.set(Path{"nested", "counters"}, counters);
  return tree;
}

void check_tree_of(const TensorTree& tree, int rank, std::int64_t elements) {
  const Tensor& values = tree.get(Path{"values"});
  const Tensor& counters = tree.get(Path{"nested", "counters"});
  REQUIRE(values.numel() == elements);
  REQUIRE(counters.numel() == elements / 4);
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < elements; ++i) {
    if (values.data<float>()[i] != static_cast<float>(rank_value(rank, i))) ++wrong;
  }
  for (std::int64_t i = 0; i < elements / 4; ++i) {
    if (counters.data<std::int64_t>()[i] != 1000 * (rank + 1) + i) ++wrong;
  }
  CHECK(wrong == 0);
}

GroupOptions options_with_limit(std::uint64_t limit) {
  GroupOptions options;
  options.max_message_bytes = limit;
  return options;
}

}  // namespace

TEST_CASE("peer claims: the limit defaults to 1 GiB and TENSORTREE_MAX_MESSAGE_BYTES sets it", "[ops][claims]") {
  CHECK(GroupOptions{}.resolve().max_message_bytes == kDefaultLimit);
  CHECK(Group{}.options().max_message_bytes == kDefaultLimit);
  {
    const ScopedEnv env("TENSORTREE_MAX_MESSAGE_BYTES", "12345");
    CHECK(GroupOptions{}.resolve().max_message_bytes == 12345);
  }
  for (const char* bad : {"0", "-5", "12k", "lots", "99999999999999999999999"}) {
    INFO("TENSORTREE_MAX_MESSAGE_BYTES=" << bad);
    const ScopedEnv env("TENSORTREE_MAX_MESSAGE_BYTES", bad);
    CHECK_THAT(error_of<InvalidArgument>([] { GroupOptions{}.resolve(); }),
               Catch::Contains("TENSORTREE_MAX_MESSAGE_BYTES") && Catch::Contains(bad));
  }
  CHECK(context().new_group({0}, options_with_limit(4096)).options().max_message_bytes == 4096);
}

TEST_CASE("peer claims: from_remote_init refuses a schema of a huge but consistent tree", "[ops][claims]") {
  const Group& world = context().world();
  const int sender = last_rank(world);
  // 2^40 bytes: a valid layout, refused by the limit; near 2^64: the sum with the wire header wraps.
  const std::int64_t quarter = std::int64_t{1} << 62;
  struct Case {
    const char* name;
    std::vector<std::int64_t> lengths;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"2^40 bytes", {std::int64_t{1} << 40}, "claimed"},
      {"2^64 - 64 bytes", {quarter, quarter, quarter, quarter - 64}, "overflows"},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    INFO(cases[c].name);
    const int tag = 300 + static_cast<int>(c);
    std::optional<Schema> schema;
    try {
      schema = schema_of_leaves(cases[c].lengths);
    } catch (const InvalidArgument&) {
      // A schema planner that refuses such a total leaves nothing for a peer to claim.
      WARN("Schema::plan refuses " << cases[c].name << "; nothing to send");
      continue;
    }
    if (world.rank() == sender) {
      // The schema alone: no data message follows, so nothing is left waiting.
      world.transport(0, Device::cpu()).send(bytes_tensor(schema->encode()), 0, tag)->wait();
    } else if (world.rank() == 0) {
      const std::string error = error_of<CorruptData>([&] { TensorTree::from_remote_init(sender, world, {.tag = tag}); });
      CHECK_THAT(error, Catch::Contains("from_remote_init") && Catch::Contains("rank " + std::to_string(sender)) &&
                            Catch::Contains(cases[c].expected));
      if (std::string(cases[c].expected) != "overflows") {
        CHECK_THAT(error, Catch::Contains(std::to_string(schema->total_bytes() + kWireHeaderBytes)) &&
                              Catch::Contains(std::to_string(kDefaultLimit)));
      }
    }
  }
  dist::barrier(world);
}

TEST_CASE("peer claims: broadcast into an empty tree refuses an announcement of 2^60 bytes on every rank",
          "[ops][claims]") {
  const Group& world = context().world();
  const int root = last_rank(world);
  const std::int64_t huge = std::int64_t{1} << 60;
  const std::int64_t most = std::numeric_limits<std::int64_t>::max();
  // {ok, device, fingerprint, payload bytes, schema bytes}: the root's announcement round.
  const std::vector<std::vector<std::int64_t>> announcements = {{1, 0, 77, huge, 0}, {1, 0, 77, most, most}};
  for (const std::vector<std::int64_t>& words : announcements) {
    INFO("payload " << words[3] << ", schema " << words[4]);
    if (world.rank() == root) {
      // The announcement alone, no data round after it.
      dist::detail::metadata_collectives(world).broadcast(dist::detail::int64_tensor(words), root)->wait();
      continue;
    }
    // Rank 0 holds a tree of another layout, which does not expect this one either: the limit
    // applies to it as well. The other ranks hold nothing.
    TensorTree receiver = world.rank() == 0 ? tree_of(0, 8) : TensorTree{};
    const std::string error = error_of<CorruptData>([&] { receiver.broadcast(root, world); });
    CHECK_THAT(error, Catch::Contains("broadcast") && Catch::Contains("rank " + std::to_string(root)) &&
                          Catch::Contains(std::to_string(static_cast<std::uint64_t>(words[3]) +
                                                         static_cast<std::uint64_t>(words[4]))) &&
                          Catch::Contains(std::to_string(kDefaultLimit)));
    if (world.rank() == 0) {
      check_tree_of(receiver, 0, 8);
    } else {
      CHECK(receiver.empty());
    }
  }
  // A tree of the announced layout expects exactly its own payload, whatever the limit: the root
  // announces its own layout's fingerprint with a payload that is not that layout's size.
  TensorTree root_tree = tree_of(root, 8);
  root_tree = root_tree.consolidate();
  const auto announced_fingerprint = static_cast<std::int64_t>(root_tree.schema()->fingerprint());
  const std::int64_t wrong_total = static_cast<std::int64_t>(root_tree.schema()->total_bytes()) + 4096;
  if (world.rank() == root) {
    dist::detail::metadata_collectives(world)
        .broadcast(dist::detail::int64_tensor(std::vector<std::int64_t>{1, 0, announced_fingerprint, wrong_total, 0}),
                   root)
        ->wait();
  } else {
    TensorTree same = tree_of(world.rank(), 8);
    same = same.consolidate();
    REQUIRE(same.schema()->fingerprint() == root_tree.schema()->fingerprint());
    CHECK_THAT(error_of<CorruptData>([&] { same.broadcast(root, world); }),
               Catch::Contains(std::to_string(wrong_total)) &&
                   Catch::Contains(std::to_string(root_tree.schema()->total_bytes())));
    check_tree_of(same, world.rank(), 8);
  }
  dist::barrier(world);
}

TEST_CASE("peer claims: a shape header of 2^40 bytes fails the variadic gathers on every honest rank",
          "[ops][claims]") {
  const Group& world = context().world();
  const int hostile = last_rank(world);
  const std::int64_t huge = std::int64_t{1} << 40;
  const auto header = dist::detail::encode_header({DeviceType::CPU, DType::UInt8, {huge}}, "test");
  const Tensor mine = Tensor::full({5}, world.rank() + 1, {DType::Float32});
  for (const bool gather : {false, true}) {
    INFO((gather ? "gather_variadic_shape" : "all_gather_variadic_shape"));
    if (world.rank() == hostile) {
      // The header round alone: every other rank sees the claim and refuses before any data moves.
      const Tensor received = Tensor::empty(
          {world.size(), static_cast<std::int64_t>(dist::detail::kHeaderWords)}, {DType::Int64});
      dist::detail::metadata_collectives(world).all_gather(received, dist::detail::int64_tensor(header))->wait();
      continue;
    }
    const std::string error = error_of<CorruptData>([&] {
      if (gather) {
        dist::gather_variadic_shape(mine, 0, world);
      } else {
        dist::all_gather_variadic_shape(mine, world);
      }
    });
    CHECK_THAT(error, Catch::Contains("rank " + std::to_string(hostile)) && Catch::Contains(std::to_string(huge)) &&
                          Catch::Contains(std::to_string(kDefaultLimit)));
  }
  dist::barrier(world);
}

TEST_CASE("peer claims: object payload sizes of 2^60 bytes are refused before allocating", "[ops][claims]") {
  const Group& world = context().world();
  const int peer = last_rank(world);
  const std::int64_t huge = std::int64_t{1} << 60;
  const Tensor size = dist::detail::int64_tensor(std::vector<std::int64_t>{huge});
  // recv_object: the size message alone.
  if (world.rank() == peer) {
    world.transport(0, Device::cpu()).send(size, 0, 310)->wait();
  } else if (world.rank() == 0) {
    CHECK_THAT(error_of<CorruptData>([&] { dist::recv_object<std::vector<int>>(peer, world, {.tag = 310}); }),
               Catch::Contains("recv_object") && Catch::Contains("rank " + std::to_string(peer)) &&
                   Catch::Contains(std::to_string(huge)) && Catch::Contains(std::to_string(kDefaultLimit)));
  }
  // broadcast_object: the size round alone, seen by every receiver.
  if (world.rank() == peer) {
    dist::detail::metadata_collectives(world).broadcast(size, peer)->wait();
  } else {
    std::vector<int> value;
    CHECK_THAT(error_of<CorruptData>([&] { dist::broadcast_object(value, peer, world); }),
               Catch::Contains("broadcast_object") && Catch::Contains(std::to_string(huge)));
  }
  dist::barrier(world);
}

TEST_CASE("peer claims: a lower limit refuses a normal tree; a higher one lets it through intact", "[ops][claims]") {
  const Group& world = context().world();
  const int sender = last_rank(world);
  constexpr std::int64_t kElements = 64 * 1024;  // 256 KiB of float32 and 128 KiB of int64
  const Group strict = context().new_group(world.world_ranks(), options_with_limit(64 * 1024));
  const Group roomy = context().new_group(world.world_ranks(), options_with_limit(1024 * 1024));
  TensorTree sent = tree_of(sender, kElements);
  sent = sent.consolidate();
  const std::uint64_t claimed = sent.schema()->total_bytes() + kWireHeaderBytes;

  // The strict group: the schema of a normal tree alone (its data would never be taken).
  if (world.rank() == sender) {
    strict.transport(0, Device::cpu()).send(bytes_tensor(sent.schema()->encode()), 0, 320)->wait();
  } else if (world.rank() == 0) {
    CHECK_THAT(error_of<CorruptData>([&] { TensorTree::from_remote_init(sender, strict, {.tag = 320}); }),
               Catch::Contains(std::to_string(claimed)) && Catch::Contains(std::to_string(64 * 1024)));
  }
  // The strict group's broadcast into an empty tree: the real announcement, then nothing.
  if (world.rank() == sender) {
    const std::vector<std::int64_t> words{1, 0, static_cast<std::int64_t>(sent.schema()->fingerprint()),
                                          static_cast<std::int64_t>(sent.schema()->total_bytes()), 0};
    dist::detail::metadata_collectives(strict).broadcast(dist::detail::int64_tensor(words), sender)->wait();
  } else {
    TensorTree empty;
    CHECK_THAT(error_of<CorruptData>([&] { empty.broadcast(sender, strict); }),
               Catch::Contains(std::to_string(64 * 1024)));
  }
  dist::barrier(world);

  // The roomy group takes the same tree whole, point to point and by broadcast.
  if (world.rank() == sender) {
    sent.init_remote(0, roomy, {.tag = 321});
  } else if (world.rank() == 0) {
    check_tree_of(TensorTree::from_remote_init(sender, roomy, {.tag = 321}), sender, kElements);
  }
  TensorTree broadcast = world.rank() == sender ? sent : TensorTree{};
  broadcast.broadcast(sender, roomy);
  check_tree_of(broadcast, sender, kElements);
  // And the variadic gathers, whose blocks are each under the roomy limit.
  const std::vector<TensorTree> gathered = tree_of(world.rank(), 1024).all_gather(roomy);
  REQUIRE(gathered.size() == static_cast<std::size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) check_tree_of(gathered[static_cast<std::size_t>(r)], r, 1024);
  dist::barrier(world);
}

TEST_CASE("peer claims: the MPI backend's recv_message refuses a message over its limit without receiving it",
          "[mpi][claims]") {
  const Group& world = context().world();
  const int sender = last_rank(world);
  // A backend of its own, on a duplicate of the world, with a 1 KiB limit.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(world_comm(), &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  {
    detail::MpiBackend backend(comm, detail::MpiBackendOptions{.max_message_bytes = 1024});
    std::vector<std::uint8_t> big(4096, 7);
    std::vector<std::uint8_t> small(100);
    for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<std::uint8_t>(i + 1);
    if (world.rank() == sender) {
      MPI_Send(big.data(), static_cast<int>(big.size()), MPI_BYTE, 0, 5, comm);
      MPI_Send(small.data(), static_cast<int>(small.size()), MPI_BYTE, 0, 5, comm);
    } else if (world.rank() == 0) {
      CHECK_THAT(error_of<CorruptData>([&] { backend.recv_message(sender, 5); }),
                 Catch::Contains("rank " + std::to_string(sender)) && Catch::Contains("4096") &&
                     Catch::Contains("1024"));
      // The refused message is left unreceived, and refused again without allocating; received
      // with a buffer of its size it is gone, and the next message arrives intact.
      CHECK_THROWS_AS(backend.recv_message(sender, 5), CorruptData);
      std::vector<std::uint8_t> drained(big.size());
      MPI_Recv(drained.data(), static_cast<int>(drained.size()), MPI_BYTE, sender, 5, comm, MPI_STATUS_IGNORE);
      CHECK(drained == big);
      const ReceivedMessage next = backend.recv_message(sender, 5);
      CHECK(next.source == sender);
      REQUIRE(next.bytes.numel() == 100);
      const auto* got = static_cast<const std::uint8_t*>(next.bytes.data_ptr());
      for (std::size_t i = 0; i < small.size(); ++i) {
        INFO("byte " << i);
        CHECK(got[i] == small[i]);
      }
    }
    MPI_Barrier(comm);
  }
  MPI_Comm_free(&comm);
}

TEST_CASE("peer claims: all_to_all_single refuses rows its peers announce beyond the limit, on every rank",
          "[ops][claims]") {
  const Group& world = context().world();
  const int n = world.size();
  const Group strict = context().new_group(world.world_ranks(), options_with_limit(1024));
  // Two rows of 100 float64 to every peer: 1600 bytes announced by each, above 1 KiB.
  const Tensor input = make_tensor({2 * n, 100}, DType::Float64, values_of(world_rank()));
  CHECK_THROWS_WITH(dist::all_to_all_single(input, strict),
                    Catch::Contains("all_to_all_single") && Catch::Contains("1600 bytes"));
  // The same exchange within the limit delivers every row intact.
  const Group roomy = context().new_group(world.world_ranks(), options_with_limit(4096));
  const Tensor output = dist::all_to_all_single(input, roomy);
  REQUIRE(output.shape() == Shape{2 * n, 100});
  for (int r = 0; r < n; ++r) {
    // Rows 2r and 2r+1 of the output are rows 2*me and 2*me+1 of rank r's input.
    const ValueAt from_r = [&](std::int64_t i) { return rank_value(r, 2 * world_rank() * 100 + i); };
    CHECK(mismatch(output.slice(0, {2 * r, 2 * r + 2}).contiguous(), DType::Float64, {2, 100}, from_r) == "");
  }
}
