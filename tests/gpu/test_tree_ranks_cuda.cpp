// CUDA trees between 2 and 3 ranks on one GPU (meson runs this program under mpiexec): send/recv,
// a tree consolidated for the group and refreshed each round, isend/irecv (consolidated and leaf by leaf), init_remote, broadcast and all_gather of nested
// trees with several dtypes, a strided leaf and a leaf longer than a staging chunk. Values depend
// on the sending rank and every element is checked on the CPU. The test does not care which
// transport the group picked for CUDA tensors (NCCL refuses two ranks on one GPU: CUDA IPC or
// staging; meson runs it once more with TENSORTREE_CUDA_TRANSPORT=staged); it checks only what
// arrives.
//
// Its own main: without a CUDA device every rank exits 77 before MPI starts, so mpiexec exits 77
// and Meson reports SKIP; otherwise every rank runs every case and the job fails if any rank fails.
#include <catch2/catch.hpp>

#include "catch_session.hpp"

#include "tensortree/config.hpp"
#include "tensortree/device.hpp"

#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#if TT_HAVE_MPI

#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/path.hpp"
#include "tensortree/tree.hpp"

using namespace tensortree;

namespace {

std::unique_ptr<DistributedContext>& context_slot() {
  static std::unique_ptr<DistributedContext> context;
  return context;
}

const DistributedContext& context() { return *context_slot(); }
const Group& world() { return context().world(); }
Device gpu() { return context().device(); }

// Rank `rank`'s tree (rank < 3): nested keys, six dtypes, a transposed (strided) leaf, and
// "frames" of 1.6 MB, longer than a staging chunk. Values start at 1000 * (rank + 1) + `salt`
// (uint8: 20 + 60 * rank + salt, below 256 throughout): never zero, distinct per rank and salt,
// exact in every dtype used.
TensorTree tree_of(int rank, double salt, Device device) {
  const double start = 1000.0 * (rank + 1) + salt;
  TensorTree tree(Shape{4});
  tree.set("obs.pixels", Tensor::arange({4, 3, 2, 2}, 20.0 + 60.0 * rank + salt, 1, {DType::UInt8, device}));
  tree.set("obs.frames", Tensor::arange({4, 100000}, start, 1, {DType::Int32, device}));
  tree.set("action", Tensor::arange({4}, start + 7, 3, {DType::Int64, device}));
  tree.set("next.reward", Tensor::arange({4}, start + 0.5, 0.25, {DType::Float32, device}));
  tree.set("next.info.return", Tensor::arange({4, 2}, start + 100, 1, {DType::Float64, device}));
  tree.set("next.info.mask", Tensor::arange({4, 5}, start, 1, {DType::Int16, device}));
  tree.set("transposed", Tensor::arange({5, 4}, start + 40, 1, {DType::Float32, device}).transpose(0, 1));
  return tree;
}

// Empty when `actual` (any device) holds exactly rank `rank`'s tree with `salt`, element by
// element; otherwise the first difference, naming the leaf and the element.
std::string difference(const TensorTree& actual, int rank, double salt) {
  const TensorTree expected = tree_of(rank, salt, Device::cpu());
  std::string found;
  expected.for_each_leaf([&](const Path& path, const Tensor& want) {
    if (!found.empty()) return;
    const std::string name = path_str(path);
    if (!actual.contains(path)) {
      found = name + " is missing";
      return;
    }
    const Tensor got = actual.get(path).to(Device::cpu()).contiguous();
    if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
      found = name + " is " + std::string(dtype_name(got.dtype())) + shape_str(got.shape()) + ", expected " +
              std::string(dtype_name(want.dtype())) + shape_str(want.shape());
      return;
    }
    const Tensor dense = want.contiguous();
    for (std::int64_t i = 0; i < dense.numel(); ++i) {
      if (got.value_at_linear(i) != dense.value_at_linear(i)) {
        found = name + " element " + std::to_string(i) + " is " + std::to_string(got.value_at_linear(i).real()) +
                ", expected " + std::to_string(dense.value_at_linear(i).real());
        return;
      }
    }
  });
  return found;
}

// A tree of the same layout on the GPU whose values no sender's match (the salts sent are whole).
TensorTree landing() { return tree_of(0, 0.5, gpu()); }

int left_of(int rank) { return (rank + world().size() - 1) % world().size(); }
int right_of(int rank) { return (rank + 1) % world().size(); }

}  // namespace

TEST_CASE("CUDA trees sent and received with blocking calls arrive whole at every rank", "[ranks][cuda][p2p]") {
  const int me = world().rank();
  const int size = world().size();
  // Rank 0 sends to each rank in turn, then each sends back: no two blocking sends face each other.
  if (me == 0) {
    for (int r = 1; r < size; ++r) tree_of(0, 1, gpu()).send(r, world());
    for (int r = 1; r < size; ++r) {
      TensorTree back = landing();
      INFO("from rank " << r);
      CHECK(back.recv(r, world()) == r);
      CHECK(difference(back, r, 2) == "");
    }
  } else {
    TensorTree received = landing();
    received.recv(0, world());
    CHECK(difference(received, 0, 1) == "");
    tree_of(me, 2, gpu()).send(0, world());
  }
}

TEST_CASE("a CUDA tree consolidated for the group is sent from its own buffer, refreshed round after round",
          "[ranks][cuda][p2p]") {
  const int me = world().rank();
  constexpr int kRounds = 3;
  if (me == 0) {
    TensorTree packed = tree_of(0, 0, gpu()).consolidate_for(world());
    const StoragePtr buffer = packed.storage();
    for (int round = 1; round <= kRounds; ++round) {
      // Each send completed when its receiver had copied the buffer: it may be written again.
      tree_of(0, round, gpu()).consolidate_into(packed);
      CHECK(packed.storage() == buffer);
      for (int r = 1; r < world().size(); ++r) packed.send(r, world());
    }
    // The first broadcast of a layout writes its schema behind the payload, over the wire header
    // the sends left there: the send after it must write the header again.
    packed.broadcast(0, world());
    tree_of(0, kRounds + 1, gpu()).consolidate_into(packed);
    for (int r = 1; r < world().size(); ++r) packed.send(r, world());
  } else {
    TensorTree received = landing().consolidate();
    for (int round = 1; round <= kRounds; ++round) {
      received.recv(0, world());
      INFO("round " << round);
      CHECK(difference(received, 0, round) == "");
    }
    received.broadcast(0, world());
    CHECK(difference(received, 0, kRounds) == "");
    received.recv(0, world());
    CHECK(difference(received, 0, kRounds + 1) == "");
  }
}

TEST_CASE("CUDA regions a sender lets go are freed once the receiver closed its mapping: ten times the GPU's "
          "memory goes through them", "[ranks][cuda][p2p][release]") {
  if (world().size() < 2) return;
  const int me = world().rank();
  // 1600 trees of 1 GiB and more, each larger than any before, so that each gets a region of its
  // own (the group's pool of outgoing buffers keeps 16 and lets go of the oldest): 2.8 TiB sent
  // once and let go, over ten times the largest GPU's memory. Kept, as the transport once kept
  // every region it exported, they would run the GPU out of memory within the first hundred.
  constexpr int kRounds = 1600;
  // int32: 1 GiB + 1 MiB * round; round 0 is the receiver's zeros of that round's size.
  const auto block = [&](int round, bool zeros = false) {
    const std::int64_t elements = (std::int64_t{1} << 28) + (std::int64_t{1} << 18) * round;
    TensorTree tree(Shape{1});
    tree.set("block", zeros ? Tensor::zeros({1, elements}, {DType::Int32, gpu()})
                            : Tensor::arange({1, elements}, 7.0 * round, 1, {DType::Int32, gpu()}));
    return tree;
  };
  if (me == 0) {
    for (int round = 1; round <= kRounds; ++round) block(round).consolidate_for(world()).send(1, world());
  } else if (me == 1) {
    for (int round = 1; round <= kRounds; ++round) {
      const TensorTree expected = block(round);
      TensorTree received = block(round, true).consolidate();
      received.recv(0, world());
      INFO("round " << round);
      REQUIRE(received.get("block").equal(expected.get("block")));
    }
  }
  dist::barrier(world());
}

TEST_CASE("CUDA trees isend/irecv around a ring, consolidated and leaf by leaf, two on one tag",
          "[ranks][cuda][p2p]") {
  const int me = world().rank();
  for (const TransferMode mode : {TransferMode::Consolidated, TransferMode::PerLeaf}) {
    INFO((mode == TransferMode::Consolidated ? "consolidated" : "per leaf"));
    const CommOptions options{.tag = 5, .mode = mode};
    const TensorTree first = tree_of(me, 3, gpu());
    const TensorTree second = tree_of(me, 4, gpu());
    TensorTree first_in = landing();
    TensorTree second_in = landing();
    const WorkPtr first_sent = first.isend(right_of(me), world(), options);
    const WorkPtr second_sent = second.isend(right_of(me), world(), options);
    const WorkPtr first_received = first_in.irecv(left_of(me), world(), options);
    const WorkPtr second_received = second_in.irecv(left_of(me), world(), options);
    second_received->wait();
    first_received->wait();
    first_sent->wait();
    second_sent->wait();
    CHECK(difference(first_in, left_of(me), 3) == "");
    CHECK(difference(second_in, left_of(me), 4) == "");
  }
}

TEST_CASE("CUDA trees from init_remote arrive on the GPU with their layout and values", "[ranks][cuda][p2p]") {
  const int me = world().rank();
  const int size = world().size();
  if (me == 0) {
    for (int r = 1; r < size; ++r) tree_of(0, 5, gpu()).init_remote(r, world());
  } else {
    const TensorTree made = TensorTree::from_remote_init(0, world());
    CHECK(made.device() == gpu());
    CHECK(difference(made, 0, 5) == "");
  }
}

TEST_CASE("a CUDA tree broadcast from the last rank overwrites every other rank's", "[ranks][cuda][collective]") {
  const int me = world().rank();
  const int root = world().size() - 1;
  for (int round = 0; round < 2; ++round) {  // the second time the layout is known
    INFO("round " << round);
    TensorTree tree = tree_of(me, 6 + round, gpu());
    tree.broadcast(root, world());
    CHECK(tree.device() == gpu());
    CHECK(difference(tree, root, 6 + round) == "");
  }
}

TEST_CASE("a CUDA tree all_gathered holds every rank's tree in rank order", "[ranks][cuda][collective]") {
  const int me = world().rank();
  const std::vector<TensorTree> gathered = tree_of(me, 8, gpu()).all_gather(world());
  REQUIRE(gathered.size() == static_cast<std::size_t>(world().size()));
  for (int r = 0; r < world().size(); ++r) {
    INFO("block of rank " << r);
    CHECK(gathered[static_cast<std::size_t>(r)].device() == gpu());
    CHECK(difference(gathered[static_cast<std::size_t>(r)], r, 8) == "");
  }
}

namespace {

// Element i of rank r's piece of a large collective: exact in float64, distinct per rank and root.
double piece_value(int rank, int root, std::int64_t i) { return 1e7 * (rank + 1) + 1e5 * root + static_cast<double>(i); }

Tensor piece_on(Device device, int rank, int root, std::int64_t length) {
  Tensor host = Tensor::empty({length}, {DType::Float64});
  for (std::int64_t i = 0; i < length; ++i) host.data<double>()[i] = piece_value(rank, root, i);
  return host.to(device);
}

// Empty when `tensor` (any device) holds piece_value(rank, root, i) at element i.
std::string piece_difference(const Tensor& tensor, int rank, int root) {
  const Tensor host = tensor.to(Device::cpu()).contiguous();
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    if (host.data<double>()[i] != piece_value(rank, root, i)) {
      return "element " + std::to_string(i) + " is " + std::to_string(host.data<double>()[i]);
    }
  }
  return {};
}

}  // namespace

// Pieces of 1.5 MiB and 3 elements: more than the staged transport's 1 MiB chunks, not a whole
// number of them, so that staged collectives copy chunk rows between the GPU and pinned memory.
TEST_CASE("CUDA all_gather, gather and scatter of pieces longer than a staging chunk, every root",
          "[ranks][cuda][collective]") {
  const int me = world().rank();
  const int size = world().size();
  constexpr std::int64_t kLength = (std::int64_t{3} << 20) / 2 / 8 + 3;
  const std::vector<Tensor> gathered = dist::all_gather(piece_on(gpu(), me, 0, kLength), world());
  REQUIRE(gathered.size() == static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    INFO("all_gather, block of rank " << r);
    CHECK(gathered[static_cast<std::size_t>(r)].device() == gpu());
    CHECK(piece_difference(gathered[static_cast<std::size_t>(r)], r, 0) == "");
  }
  for (int root = 0; root < size; ++root) {
    INFO("root " << root);
    const std::vector<Tensor> at_root = dist::gather(piece_on(gpu(), me, root, kLength), root, world());
    if (me == root) {
      REQUIRE(at_root.size() == static_cast<std::size_t>(size));
      for (int r = 0; r < size; ++r) CHECK(piece_difference(at_root[static_cast<std::size_t>(r)], r, root) == "");
    }
    std::vector<Tensor> inputs;
    if (me == root) {
      for (int r = 0; r < size; ++r) inputs.push_back(piece_on(gpu(), r, root, kLength));
    }
    const Tensor mine = dist::scatter(inputs, root, world());
    CHECK(mine.device() == gpu());
    CHECK(piece_difference(mine, me, root) == "");
  }
}

TEST_CASE("debug mode: CUDA float64 sent into a float32 receiver of equal bytes fails the receiver, naming both",
          "[ranks][cuda][p2p][debug]") {
  std::vector<int> everyone(static_cast<std::size_t>(world().size()));
  for (int r = 0; r < world().size(); ++r) everyone[static_cast<std::size_t>(r)] = r;
  const Group checked = context().new_group(everyone, GroupOptions{.debug_checks = true});
  if (checked.size() < 2) return;
  const int me = checked.rank();
  const int last = checked.size() - 1;
  if (me == 0) {
    dist::send(Tensor::arange({3, 5}, 1, 1, {DType::Float64, gpu()}), last, checked);
    dist::send(Tensor::arange({2, 5}, 7, 1, {DType::Float32, gpu()}), last, checked);
  } else if (me == last) {
    const Tensor wrong = Tensor::zeros({6, 5}, {DType::Float32, gpu()});
    CHECK_THROWS_WITH(dist::recv(wrong, 0, checked),
                      Catch::Contains("rank 0 sent float64 [3, 5] (120 bytes) but this rank receives into float32 "
                                      "[6, 5] (120 bytes)"));
    const Tensor right = Tensor::zeros({2, 5}, {DType::Float32, gpu()});
    dist::recv(right, 0, checked);
    const Tensor host = right.to(Device::cpu());
    for (std::int64_t i = 0; i < 10; ++i) CHECK(host.value_at_linear(i).real() == 7.0 + static_cast<double>(i));
  }
}

namespace {

// Failed test cases summed over the world, so that every rank returns the job's verdict.
int failures_everywhere(int local) {
  const Tensor count = Tensor::full({1}, local, {DType::Int32});
  dist::all_reduce(count, world(), ReduceOp::Sum);
  return count.data<std::int32_t>()[0];
}

}  // namespace

#endif  // TT_HAVE_MPI

int main([[maybe_unused]] int argc, [[maybe_unused]] char* argv[]) {
  constexpr int kSkipped = 77;
  if (tensortree::cuda_device_count() == 0) {
    std::cout << "GPU tests skipped: no CUDA device found (" << tensortree::build_features() << ")\n";
    return kSkipped;
  }
#if TT_HAVE_MPI
  context_slot() = std::make_unique<DistributedContext>(&argc, &argv);
  const int status = tensortree::test::run_catch_session(argc, argv, tensortree::test::CatchColour::No);
  const int failed = failures_everywhere(status);
  context_slot().reset();
  return failed == 0 ? 0 : 1;
#else
  std::cout << "GPU tests skipped: built without MPI\n";
  return kSkipped;
#endif
}
