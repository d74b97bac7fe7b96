// How many MPI messages a tree transfer costs, counted through MPI's profiling interface: this file
// defines MPI_Isend, MPI_Irecv, ... which count each call and its byte length and then call PMPI_*.
// The test executable defines these symbols and libtensortree.so references them, so the dynamic
// linker binds the library's calls here; the first test proves that the counters move at all.
// Every MPI call of the whole dist_tests binary goes through these wrappers: they stay trivial and
// thread-safe (atomics only).
#include <catch2/catch.hpp>
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "dist_support.hpp"
#include "tree_values.hpp"
#include "transport/shm/frame.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

struct Counter {
  std::atomic<std::int64_t> calls{0};
  std::atomic<std::int64_t> bytes{0};       // all calls together
  std::atomic<std::int64_t> last_bytes{0};  // the latest call

  void record(int count, MPI_Datatype datatype) {
    int size = 0;
    PMPI_Type_size(datatype, &size);
    const std::int64_t nbytes = static_cast<std::int64_t>(count) * size;
    bytes += nbytes;
    last_bytes = nbytes;
    ++calls;
  }
};

// Point-to-point sends, point-to-point receives, reductions and broadcasts, of this process.
Counter sends;
Counter receives;
Counter reductions;
Counter broadcasts;

// What a counter reads at one moment, and what happened since.
struct Snapshot {
  std::int64_t calls;
  std::int64_t bytes;
};
Snapshot snap(const Counter& counter) { return {counter.calls.load(), counter.bytes.load()}; }
Snapshot since(const Snapshot& before, const Counter& counter) {
  return {counter.calls.load() - before.calls, counter.bytes.load() - before.bytes};
}

}  // namespace

extern "C" {

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  sends.record(count, datatype);
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  sends.record(count, datatype);
  return PMPI_Ssend(buf, count, datatype, dest, tag, comm);
}

int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  sends.record(count, datatype);
  return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
}

int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  sends.record(count, datatype);
  return PMPI_Issend(buf, count, datatype, dest, tag, comm, request);
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  receives.record(count, datatype);
  return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}

int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  // The receive a node-local receiver posts once per peer for its region release requests is the
  // transport's bookkeeping, not a message of any tree.
  if (tag != tensortree::detail::kReleaseTag) receives.record(count, datatype);
  return PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
}

int MPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status) {
  receives.record(count, datatype);
  return PMPI_Mrecv(buf, count, datatype, message, status);
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request) {
  receives.record(count, datatype);
  return PMPI_Imrecv(buf, count, datatype, message, request);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  reductions.record(count, datatype);
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  reductions.record(count, datatype);
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  reductions.record(count, datatype);
  return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request) {
  reductions.record(count, datatype);
  return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  broadcasts.record(count, datatype);
  return PMPI_Bcast(buffer, count, datatype, root, comm);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  broadcasts.record(count, datatype);
  return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
}

}  // extern "C"

namespace {

constexpr std::int64_t kB = 4;

// A nested tree of mixed dtypes: images, actions, rewards, the next step, episode statistics.
const std::vector<LeafDef>& rollout() {
  static const std::vector<LeafDef> defs = {
      {"obs", DType::UInt8, {kB, 3, 4, 4}},
      {"action", DType::Int64, {kB}},
      {"reward", DType::Float32, {kB}},
      {"next.obs", DType::UInt8, {kB, 3, 4, 4}},
      {"next.reward", DType::Float32, {kB}},
      {"info.episode_return", DType::Float64, {kB}},
      {"info.episode_len", DType::Int32, {kB}},
  };
  return defs;
}

TensorTree make_tree(int rank, int step) { return make_tree(rollout(), {kB}, rank, step); }
void fill(const TensorTree& tree, int rank, int step) { fill_tree(tree, rollout(), rank, step); }
std::string tree_mismatch(const TensorTree& tree, int rank, int step) { return tree_mismatch(tree, rollout(), rank, step); }

// A group of every rank whose host tensors between ranks go as `transport` says.
Group all_ranks_over(HostTransport transport) {
  std::vector<int> everyone(static_cast<std::size_t>(context().size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  GroupOptions options;
  options.host_transport = transport;
  return context().new_group(everyone, options);
}

// MPI, and shared memory where the ranks share this node and may map each other's memory (the
// world group chose it for its peers).
std::vector<HostTransport> transports_here() {
  const Group& world = context().world();
  const int peer = (world.rank() + 1) % world.size();
  const bool shared = world.size() > 1 && std::string(world.transport(peer, Device::cpu()).name()).starts_with("shared");
  REQUIRE(on_every_rank(shared) == shared);  // every rank decided alike
  if (shared) return {HostTransport::Mpi, HostTransport::SharedMemory};
  return {HostTransport::Mpi};
}

// The largest payload a shared-memory frame carries inside it (the default, or what the test run set).
std::int64_t inline_limit() {
  const char* text = std::getenv("TENSORTREE_SHM_INLINE_BYTES");
  return text && *text ? std::stoll(text) : 8192;
}

// The bytes of the one message that moves a payload of `payload` bytes over `transport`: the payload
// itself over MPI; over shared memory a frame, with the payload inside it when it is small enough.
std::int64_t message_bytes(HostTransport transport, std::int64_t payload) {
  if (transport == HostTransport::Mpi) return payload;
  const auto frame = static_cast<std::int64_t>(detail::kFrameHeaderBytes);
  return payload <= inline_limit() ? frame + payload : frame;
}

}  // namespace

TEST_CASE("the MPI profiling wrappers see the library's point-to-point calls", "[tree_comm][tree_messages]") {
  const Group& world = context().world();
  const Snapshot sent_before = snap(sends);
  const Snapshot received_before = snap(receives);
  const Tensor out = Tensor::full({5}, 3, {DType::Int32});
  const Tensor in = Tensor::zeros({5}, {DType::Int32});
  const WorkPtr sent = dist::isend(out, world.rank(), world, {.tag = 3});
  dist::recv(in, world.rank(), world, {.tag = 3});
  sent->wait();
  const Snapshot sent_now = since(sent_before, sends);
  const Snapshot received_now = since(received_before, receives);
  CHECK(in.equal(out));
  CHECK(sent_now.calls == 1);
  CHECK(sent_now.bytes == 20);
  CHECK(received_now.calls == 1);
  CHECK(received_now.bytes == 20);
  // Without the binding, the tests below would pass on zeros.
  REQUIRE(on_every_rank(sent_now.calls == 1 && received_now.calls == 1));
}

namespace {

// Pairs 0 -> 1, 2 -> 3 (a last odd rank sits out): init_remote, then 100 checked transfers.
void steady_state_transfers(const Group& world, HostTransport transport) {
  const int rank = world.rank();
  const bool sender = rank % 2 == 0;
  const int partner = sender ? rank + 1 : rank - 1;
  if (partner >= world.size()) return;
  constexpr int kSteps = 100;
  for (const bool consolidated_sender : {false, true}) {
    INFO("sender consolidated " << consolidated_sender);
    if (sender) {
      const TensorTree tree = consolidated_sender ? make_tree(rank, 0).consolidate() : make_tree(rank, 0);
      const auto total = static_cast<std::int64_t>(tree.consolidate().schema()->total_bytes());
      const Snapshot init_before = snap(sends);
      tree.init_remote(partner, world, {.tag = 70});
      CHECK(since(init_before, sends).calls <= 2);

      std::int64_t wrong_counts = 0;
      std::int64_t wrong_lengths = 0;
      std::int64_t last_length = 0;
      for (int step = 1; step <= kSteps; ++step) {
        fill(tree, rank, step);
        const Snapshot before = snap(sends);
        tree.send(partner, world, {.tag = 71});
        const Snapshot now = since(before, sends);
        wrong_counts += now.calls != 1 ? 1 : 0;
        wrong_lengths += now.bytes != message_bytes(transport, total + kWireHeaderBytes) ? 1 : 0;
        last_length = now.bytes;
      }
      INFO("payload " << total << " bytes, last message " << last_length << " bytes");
      CHECK(wrong_counts == 0);
      CHECK(wrong_lengths == 0);
      CHECK(kWireHeaderBytes <= 64);
    } else {
      const Snapshot init_before = snap(receives);
      TensorTree tree = TensorTree::from_remote_init(partner, world, {.tag = 70});
      CHECK(since(init_before, receives).calls <= 2);
      CHECK(tree_mismatch(tree, partner, 0) == "");
      REQUIRE(tree.is_consolidated());
      const auto total = static_cast<std::int64_t>(tree.schema()->total_bytes());

      std::int64_t wrong_counts = 0;
      std::int64_t wrong_lengths = 0;
      std::int64_t wrong_values = 0;
      std::string first_wrong_value;
      for (int step = 1; step <= kSteps; ++step) {
        const Snapshot before = snap(receives);
        tree.recv(partner, world, {.tag = 71});
        const Snapshot now = since(before, receives);
        wrong_counts += now.calls != 1 ? 1 : 0;
        wrong_lengths += now.bytes != message_bytes(transport, total + kWireHeaderBytes) ? 1 : 0;
        const std::string problem = tree_mismatch(tree, partner, step);
        if (!problem.empty() && wrong_values++ == 0) first_wrong_value = "step " + std::to_string(step) + ": " + problem;
      }
      INFO(first_wrong_value);
      CHECK(wrong_counts == 0);
      CHECK(wrong_lengths == 0);
      CHECK(wrong_values == 0);
    }
  }
}

}  // namespace

TEST_CASE("init_remote takes at most two messages, then each of 100 steady-state transfers is one message of "
          "the payload and a header of at most 64 bytes (and the shared-memory frame's)",
          "[tree_comm][tree_messages]") {
  for (const HostTransport transport : transports_here()) {
    INFO("shared memory " << (transport == HostTransport::SharedMemory));
    steady_state_transfers(all_ranks_over(transport), transport);
  }
}

namespace {

// Pairs as above: one PerLeaf transfer, counted and checked.
void per_leaf_transfer(const Group& world, HostTransport transport) {
  const int rank = world.rank();
  const bool sender = rank % 2 == 0;
  const int partner = sender ? rank + 1 : rank - 1;
  if (partner >= world.size()) return;
  std::int64_t payload = 0;  // the bytes of the leaves' messages
  for (const LeafDef& def : rollout()) {
    std::int64_t numel = 1;
    for (std::int64_t d : def.shape) numel *= d;
    payload += message_bytes(transport, numel * static_cast<std::int64_t>(itemsize(def.dtype)));
  }
  const auto leaves = static_cast<std::int64_t>(rollout().size());
  if (sender) {
    const TensorTree tree = make_tree(rank, 7);
    const Snapshot before = snap(sends);
    tree.send(partner, world, {.tag = 72, .mode = TransferMode::PerLeaf});
    const Snapshot now = since(before, sends);
    CHECK(now.calls == leaves);
    CHECK(now.bytes == payload);
  } else {
    TensorTree tree = make_tree(rank, 0);
    const Snapshot before = snap(receives);
    tree.recv(partner, world, {.tag = 72, .mode = TransferMode::PerLeaf});
    const Snapshot now = since(before, receives);
    CHECK(now.calls == leaves);
    CHECK(now.bytes == payload);
    CHECK(tree_mismatch(tree, partner, 7) == "");
  }
}

}  // namespace

TEST_CASE("a PerLeaf transfer is one message per leaf, without a header (but the shared-memory frame's)",
          "[tree_comm][tree_messages]") {
  for (const HostTransport transport : transports_here()) {
    INFO("shared memory " << (transport == HostTransport::SharedMemory));
    per_leaf_transfer(all_ranks_over(transport), transport);
  }
}

TEST_CASE("all_reduce and reduce of a tree make one reduction per dtype bucket besides at most one layout check",
          "[tree_comm][tree_messages]") {
  const Group& world = context().world();
  const int rank = world.rank();
  for (const bool to_root : {false, true}) {
    INFO((to_root ? "reduce" : "all_reduce"));
    TensorTree tree = make_tree(rank, 9).consolidate();
    const auto buckets = static_cast<std::int64_t>(tree.schema()->buckets().size());
    std::int64_t payload = 0;
    for (const LeafSpec& spec : tree.schema()->leaves()) payload += static_cast<std::int64_t>(spec.nbytes);
    const Snapshot before = snap(reductions);
    if (to_root) {
      tree.reduce(0, world, ReduceOp::Max);
    } else {
      tree.all_reduce(world, ReduceOp::Max);
    }
    const Snapshot now = since(before, reductions);
    INFO(buckets << " buckets of " << payload << " bytes; " << now.calls << " reductions of " << now.bytes << " bytes");
    CHECK(now.calls >= buckets);
    CHECK(now.calls <= buckets + 1);
    CHECK(now.bytes >= payload);
    CHECK(now.bytes <= static_cast<std::int64_t>(tree.schema()->total_bytes()) + 256);
    REQUIRE(on_every_rank(true));
  }
}

TEST_CASE("broadcast carries the schema only the first time a layout is broadcast on a group", "[tree_comm][tree_messages]") {
  std::vector<int> ranks(static_cast<std::size_t>(world_size()));
  for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  // A new group: no layout has been broadcast on it yet.
  const Group group = context().new_group(ranks);
  const int root = group.size() - 1;
  const int rank = group.rank();
  TensorTree tree = rank == root ? make_tree(root, 11).consolidate() : TensorTree();
  const auto total = static_cast<std::int64_t>(make_tree(root, 11).consolidate().schema()->total_bytes());

  const Snapshot first_before = snap(broadcasts);
  tree.broadcast(root, group);
  const Snapshot first = since(first_before, broadcasts);
  CHECK(tree_mismatch(tree, root, 11) == "");

  if (rank == root) fill(tree, root, 12);
  const Snapshot second_before = snap(broadcasts);
  tree.broadcast(root, group);
  const Snapshot second = since(second_before, broadcasts);
  CHECK(tree_mismatch(tree, root, 12) == "");

  INFO("payload " << total << " bytes; first broadcast " << first.calls << " calls, " << first.bytes
                  << " bytes; second " << second.calls << " calls, " << second.bytes << " bytes");
  // The first carries the schema besides the payload and a small announcement; the second does not.
  CHECK(first.bytes > second.bytes);
  CHECK(second.bytes >= total);
  CHECK(second.bytes <= total + 64);
  CHECK(second.calls <= 2);
}

namespace {

// Pairs as above: the sender consolidates once for the group and refreshes that buffer each round.
void rounds_from_a_buffer_for_the_group(const Group& group, HostTransport transport) {
  // 48 KiB of pixels: more than a shared-memory frame carries inside it.
  static const std::vector<LeafDef> defs = {
      {"obs", DType::UInt8, {16, 3, 32, 32}},
      {"reward", DType::Float32, {16}},
      {"info.length", DType::Int32, {16}},
  };
  const Shape batch{16};
  const int rank = group.rank();
  const bool sender = rank % 2 == 0;
  const int partner = sender ? rank + 1 : rank - 1;
  if (partner >= group.size()) return;
  constexpr int kRounds = 4;
  if (sender) {
    const TensorTree source = make_tree(defs, batch, rank, 0);
    TensorTree packed = source.consolidate_for(group);
    const StoragePtr buffer = packed.storage();
    CHECK(buffer->kind() == (transport == HostTransport::SharedMemory ? MemoryKind::SharedHost : MemoryKind::Host));
    for (int round = 1; round <= kRounds; ++round) {
      // The previous send completed: the receiver has its copy, so this may overwrite the buffer.
      fill_tree(source, defs, rank, round);
      source.consolidate_into(packed);
      CHECK(packed.storage() == buffer);
      packed.send(partner, group, {.tag = 73});
    }
  } else {
    TensorTree received = make_tree(defs, batch, rank, 0).consolidate();
    for (int round = 1; round <= kRounds; ++round) {
      received.recv(partner, group, {.tag = 73});
      INFO("round " << round);
      CHECK(tree_mismatch(received, defs, partner, round) == "");
    }
  }
}

}  // namespace

TEST_CASE("a tree consolidated for its group lies in memory the group sends from, and each round arrives whole",
          "[tree_comm][tree_messages]") {
  for (const HostTransport transport : transports_here()) {
    INFO("shared memory " << (transport == HostTransport::SharedMemory));
    rounds_from_a_buffer_for_the_group(all_ranks_over(transport), transport);
  }
}
