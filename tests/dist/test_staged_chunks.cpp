// StagedBackend's chunks, on host tensors (the same code cuts CUDA tensors, with device copies
// queued on streams instead of memcpy): a tiny chunk size makes every message below travel as many
// host messages, and every element is checked on every rank. Tags are distinct per test case so
// that a chunk left over by a failing case cannot be taken by the next one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops_test_support.hpp"
#include "transport/staged/staged_backend.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// Odd: byte chunks split elements, reductions round down to whole ones (3 float64, 6 int32, 13 int16).
constexpr std::size_t kChunkBytes = 27;
constexpr auto kChunkLength = static_cast<std::int64_t>(kChunkBytes);
constexpr std::int64_t kElements = 301;  // 1204 float32 bytes: 45 chunks

// The world's MPI engine: the transport of the own rank (shared memory may serve the others).
detail::Engine& host_backend() {
  const Group& world = context().world();
  return dynamic_cast<detail::Engine&>(world.transport(world.rank(), Device::cpu()));
}

detail::StagedBackend staged_backend() { return detail::StagedBackend(host_backend(), {.chunk_bytes = kChunkBytes}); }

ValueAt shifted(int rank, std::int64_t shift) {
  return [rank, shift](std::int64_t i) { return rank_value(rank, i + shift); };
}

}  // namespace

TEST_CASE("staged chunks: a message longer than a chunk travels as chunk-sized host messages on its tag",
          "[staged][chunks]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  constexpr int kTag = 71;
  constexpr std::int64_t kBytes = 100;  // chunks of 27, 27, 27 and 19 bytes
  if (me == 0) {
    staged.send(make_tensor({kBytes}, DType::UInt8, [](std::int64_t i) { return static_cast<double>(i + 1); }), 1, kTag)
        ->wait();
  } else if (me == 1) {
    // The host backend, receiving chunk by chunk, sees exactly the chunks the receiving end expects.
    for (std::int64_t start = 0; start < kBytes; start += kChunkLength) {
      const std::int64_t length = std::min(kChunkLength, kBytes - start);
      const Tensor chunk = Tensor::zeros({length}, {DType::UInt8});
      host_backend().recv(chunk, 0, kTag)->wait();
      CHECK(mismatch(chunk, DType::UInt8, {length}, [start](std::int64_t i) { return static_cast<double>(start + i + 1); }) ==
            "");
    }
  }
  barrier();
}

TEST_CASE("staged chunks: a message a whole number of chunks long ends with an empty chunk", "[staged][chunks]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  constexpr int kTag = 76;
  constexpr std::int64_t kBytes = 2 * kChunkLength;
  const ValueAt byte_values = [](std::int64_t i) { return static_cast<double>(i + 9); };
  if (me == 0) {
    staged.send(make_tensor({kBytes}, DType::UInt8, byte_values), 1, kTag)->wait();
  } else if (me == 1) {
    for (const std::int64_t start : {std::int64_t{0}, kChunkLength}) {
      const Tensor chunk = Tensor::zeros({kChunkLength}, {DType::UInt8});
      host_backend().recv(chunk, 0, kTag)->wait();
      CHECK(mismatch(chunk, DType::UInt8, {kChunkLength}, [&](std::int64_t i) { return byte_values(start + i); }) ==
            "");
    }
    host_backend().recv(Tensor::zeros({0}, {DType::UInt8}), 0, kTag)->wait();
  }
  barrier();
}

TEST_CASE("staged chunks: a receive expecting fewer whole chunks than were sent fails instead of keeping a prefix",
          "[staged][chunks]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  constexpr int kTag = 77;
  const ValueAt byte_values = [](std::int64_t i) { return static_cast<double>(i % 200 + 1); };
  if (me == 0) {
    staged.send(make_tensor({3 * kChunkLength}, DType::UInt8, byte_values), 1, kTag)->wait();
  } else if (me == 1) {
    const Tensor shorter = Tensor::zeros({2 * kChunkLength}, {DType::UInt8});
    CHECK_THROWS_AS(staged.recv(shorter, 0, kTag)->wait(), InvalidArgument);
    // The failed receive's empty end took the sender's third chunk (and failed on it); the
    // sender's own empty end is still to be received.
    host_backend().recv(Tensor::zeros({0}, {DType::UInt8}), 0, kTag)->wait();
  }
  barrier();
}

TEST_CASE("staged chunks: a message no longer than a chunk stays one host message", "[staged][chunks]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  constexpr int kTag = 72;
  const ValueAt small_values = [](std::int64_t i) { return static_cast<double>(3 * i + 5); };
  if (me == 0) {
    staged.send(make_tensor({kChunkLength}, DType::UInt8, small_values), 1, kTag)->wait();
  } else if (me == 1) {
    const Tensor whole = Tensor::zeros({kChunkLength}, {DType::UInt8});
    host_backend().recv(whole, 0, kTag)->wait();
    CHECK(mismatch(whole, DType::UInt8, {kChunkLength}, small_values) == "");
  }
  barrier();
}

TEST_CASE("staged chunks: send and recv around a ring, two messages on one tag in flight at once",
          "[staged][chunks][p2p]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  constexpr int kTag = 73;
  const int right = (me + 1) % size;
  const int left = (me + size - 1) % size;
  const Tensor first_out = make_tensor({kElements}, DType::Float32, shifted(me, 0));
  const Tensor second_out = make_tensor({kElements + 5}, DType::Int64, shifted(me, 400));
  const Tensor first_in = Tensor::zeros({kElements}, {DType::Float32});
  const Tensor second_in = Tensor::zeros({kElements + 5}, {DType::Int64});
  // Both sends are posted before either receive, and the receives are waited for in reverse order:
  // their chunks still pair up message by message.
  const WorkPtr first_sent = staged.send(first_out, right, kTag);
  const WorkPtr second_sent = staged.send(second_out, right, kTag);
  const WorkPtr first_received = staged.recv(first_in, left, kTag);
  const WorkPtr second_received = staged.recv(second_in, left, kTag);
  second_received->wait();
  first_received->wait();
  first_sent->wait();
  second_sent->wait();
  CHECK(mismatch(first_in, DType::Float32, {kElements}, shifted(left, 0)) == "");
  CHECK(mismatch(second_in, DType::Int64, {kElements + 5}, shifted(left, 400)) == "");
}

TEST_CASE("staged chunks: a batch of leaves on one tag arrives leaf by leaf", "[staged][chunks][p2p]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  constexpr int kTag = 74;
  const int right = (me + 1) % size;
  const int left = (me + size - 1) % size;
  // Leaves shorter and longer than a chunk, mixed, as a tree sent leaf by leaf posts them.
  const std::vector<std::int64_t> lengths{kElements, 3, 50, 7, kElements / 2};
  std::vector<P2POp> ops;
  std::vector<Tensor> received;
  for (std::size_t leaf = 0; leaf < lengths.size(); ++leaf) {
    const auto shift = static_cast<std::int64_t>(100 * leaf);
    ops.push_back({P2POp::Kind::Send, make_tensor({lengths[leaf]}, DType::Float64, shifted(me, shift)), right, kTag});
  }
  for (std::int64_t length : lengths) {
    received.push_back(Tensor::zeros({length}, {DType::Float64}));
    ops.push_back({P2POp::Kind::Recv, received.back(), left, kTag});
  }
  staged.batch_p2p(ops)->wait();
  for (std::size_t leaf = 0; leaf < lengths.size(); ++leaf) {
    INFO("leaf " << leaf);
    CHECK(mismatch(received[leaf], DType::Float64, {lengths[leaf]}, shifted(left, static_cast<std::int64_t>(100 * leaf))) ==
          "");
  }
}

TEST_CASE("staged chunks: receives from any source take each sender's chunks whole", "[staged][chunks][p2p]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  constexpr int kTag = 75;
  if (me != 0) {
    staged.send(make_tensor({kElements}, DType::Int32, shifted(me, 0)), 0, kTag)->wait();
  } else {
    // Every receive is posted before any is waited for: each later one first lets the one before
    // it learn its sender, so no receive takes a chunk of another's message.
    std::vector<Tensor> landed;
    std::vector<WorkPtr> works;
    for (int i = 1; i < size; ++i) {
      landed.push_back(Tensor::zeros({kElements}, {DType::Int32}));
      works.push_back(staged.recv(landed.back(), kAnySource, kTag));
    }
    std::vector<int> senders;
    for (std::size_t i = works.size(); i-- > 0;) {
      works[i]->wait();
      const int sender = works[i]->source_rank();
      senders.push_back(sender);
      INFO("receive " << i << ", from rank " << sender);
      CHECK(mismatch(landed[i], DType::Int32, {kElements}, shifted(sender, 0)) == "");
    }
    std::sort(senders.begin(), senders.end());
    std::vector<int> everyone_else;
    for (int r = 1; r < size; ++r) everyone_else.push_back(r);
    CHECK(senders == everyone_else);
  }
  barrier();
}

TEST_CASE("staged chunks: broadcast from a non-zero root", "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int root = staged.size() - 1;
  const Tensor tensor = make_tensor({kElements}, DType::Float64, shifted(me, 0));
  staged.broadcast(tensor, root)->wait();
  CHECK(mismatch(tensor, DType::Float64, {kElements}, shifted(root, 0)) == "");
}

TEST_CASE("staged chunks: all_reduce and reduce, chunk by chunk of whole elements", "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  const int root = size - 1;
  const auto sum_over_ranks = [size](std::int64_t i) {
    double sum = 0;
    for (int r = 0; r < size; ++r) sum += rank_value(r, i);
    return sum;
  };
  for (DType dtype : {DType::Float64, DType::Int32, DType::Int16}) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor summed = make_tensor({kElements}, dtype, values_of(me));
    const Tensor maximum = make_tensor({kElements}, dtype, values_of(me));
    const Tensor reduced = make_tensor({kElements}, dtype, values_of(me));
    // Two collectives in flight, waited for in reverse order.
    const WorkPtr summing = staged.all_reduce(summed, ReduceOp::Sum);
    const WorkPtr maximising = staged.all_reduce(maximum, ReduceOp::Max);
    maximising->wait();
    summing->wait();
    staged.reduce(reduced, root, ReduceOp::Sum)->wait();
    CHECK(mismatch(summed, dtype, {kElements}, sum_over_ranks) == "");
    CHECK(mismatch(maximum, dtype, {kElements}, values_of(size - 1)) == "");
    // Off the root the tensor is the rank's own, untouched.
    CHECK(mismatch(reduced, dtype, {kElements}, me == root ? ValueAt(sum_over_ranks) : values_of(me)) == "");
  }
}

// ---- gathers and scatters: each chunk one host collective over the same part of every rank's piece ----

namespace {

// Element j of a tensor of `size` pieces of `piece` elements each, the piece of rank r holding
// value(r, i) at its element i.
ValueAt by_piece(std::int64_t piece, const std::function<double(int, std::int64_t)>& value) {
  return [piece, value](std::int64_t j) { return value(static_cast<int>(j / piece), j % piece); };
}

// Bytes that fit a uint8 and differ by rank and position, never zero.
double byte_value(int rank, std::int64_t i) { return static_cast<double>((i * 7 + rank * 31) % 251 + 1); }

}  // namespace

TEST_CASE("staged chunks: a chunked all_gather is one host all_gather per chunk of every rank's piece",
          "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  constexpr std::int64_t kBytes = 100;  // chunks of 27, 27, 27 and 19 bytes of every piece
  const Tensor input = make_tensor({kBytes}, DType::UInt8, [me](std::int64_t i) { return byte_value(me, i); });
  if (me == 0) {
    // Rank 0 stages; the others run the host collectives the chunks must be, chunk by chunk.
    const Tensor output = Tensor::zeros({size, kBytes}, {DType::UInt8});
    staged.all_gather(output, input)->wait();
    CHECK(mismatch(output, DType::UInt8, {size, kBytes}, by_piece(kBytes, byte_value)) == "");
  } else {
    for (std::int64_t start = 0; start < kBytes; start += kChunkLength) {
      const std::int64_t length = std::min(kChunkLength, kBytes - start);
      const Tensor chunk_out = Tensor::zeros({size * length}, {DType::UInt8});
      host_backend().all_gather(chunk_out, input.narrow(0, start, length).contiguous())->wait();
      // Chunk i holds every rank's part of it, rank by rank.
      CHECK(mismatch(chunk_out, DType::UInt8, {size * length},
                     by_piece(length, [start](int r, std::int64_t i) { return byte_value(r, start + i); })) == "");
    }
  }
}

TEST_CASE("staged chunks: all_gather of pieces that do not divide into chunks", "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  // Float64: 27-byte chunks cut elements in two; Int16: 301 elements of 2 bytes end on a 8-byte chunk.
  for (DType dtype : {DType::Float64, DType::Int16, DType::Float32}) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor input = make_tensor({7, 43}, dtype, shifted(me, 17));
    const Tensor output = Tensor::zeros({size, 7, 43}, {dtype});
    // Two in flight, waited for in reverse order: their chunks still pair up collective by collective.
    const Tensor second_input = make_tensor({kElements + 2}, dtype, shifted(me, 3));
    const Tensor second_output = Tensor::zeros({size * (kElements + 2)}, {dtype});
    const WorkPtr first = staged.all_gather(output, input);
    const WorkPtr second = staged.all_gather(second_output, second_input);
    second->wait();
    first->wait();
    CHECK(mismatch(output, dtype, {size, 7, 43}, by_piece(kElements, [](int r, std::int64_t i) {
                     return rank_value(r, i + 17);
                   })) == "");
    CHECK(mismatch(second_output, dtype, {size * (kElements + 2)}, by_piece(kElements + 2, [](int r, std::int64_t i) {
                     return rank_value(r, i + 3);
                   })) == "");
  }
}

TEST_CASE("staged chunks: all_gather into a non-contiguous output", "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  const Tensor input = make_tensor({kElements}, DType::Int32, shifted(me, 5));
  // [size, kElements] viewed from a [kElements, size] tensor: rank r's piece is column r.
  const Tensor storage = Tensor::zeros({kElements, size}, {DType::Int32});
  const Tensor output = storage.transpose(0, 1);
  REQUIRE_FALSE(output.is_contiguous());
  staged.all_gather(output, input)->wait();
  CHECK(mismatch(output.contiguous(), DType::Int32, {size, kElements},
                 by_piece(kElements, [](int r, std::int64_t i) { return rank_value(r, i + 5); })) == "");
}

TEST_CASE("staged chunks: gather to every root in turn", "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  for (int root = 0; root < size; ++root) {
    for (DType dtype : {DType::Float64, DType::Int32}) {
      INFO("root " << root << ", dtype " << dtype_name(dtype));
      const auto shift = static_cast<std::int64_t>(50 * root);
      const Tensor input = make_tensor({kElements}, dtype, shifted(me, shift));
      const Tensor output = me == root ? Tensor::zeros({size, kElements}, {dtype}) : Tensor();
      staged.gather(output, input, root)->wait();
      if (me == root) {
        CHECK(mismatch(output, dtype, {size, kElements}, by_piece(kElements, [shift](int r, std::int64_t i) {
                         return rank_value(r, i + shift);
                       })) == "");
      }
      // The rank's own piece is only read.
      CHECK(mismatch(input, dtype, {kElements}, shifted(me, shift)) == "");
    }
  }
}

TEST_CASE("staged chunks: scatter from every root in turn", "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  constexpr std::int64_t kPiece = kElements + 2;  // 303 elements
  for (int root = 0; root < size; ++root) {
    for (DType dtype : {DType::Float64, DType::Int16}) {
      INFO("root " << root << ", dtype " << dtype_name(dtype));
      const auto shift = static_cast<std::int64_t>(70 * root);
      // The root's rows: row r for rank r, each holding values of the root and of r.
      const ValueAt rows = [root, shift](std::int64_t j) { return rank_value(root, j + shift); };
      const Tensor input = me == root ? make_tensor({size, kPiece}, dtype, rows) : Tensor();
      const Tensor output = Tensor::zeros({kPiece}, {dtype});
      staged.scatter(output, input, root)->wait();
      CHECK(mismatch(output, dtype, {kPiece}, [&](std::int64_t i) { return rows(me * kPiece + i); }) == "");
    }
  }
}

TEST_CASE("staged chunks: reduce_scatter, chunk by chunk of whole elements of every block",
          "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  for (DType dtype : {DType::Float64, DType::Int32}) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor input = make_tensor({size, kElements}, dtype, values_of(me));
    const Tensor output = Tensor::zeros({kElements}, {dtype});
    staged.reduce_scatter(output, input, ReduceOp::Sum)->wait();
    CHECK(mismatch(output, dtype, {kElements}, [&](std::int64_t i) {
            double sum = 0;
            for (int r = 0; r < size; ++r) sum += rank_value(r, me * kElements + i);
            return sum;
          }) == "");
  }
}

TEST_CASE("staged chunks: pieces no longer than a chunk, and one byte longer", "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  const int root = size - 1;
  // 5 and 27 bytes stay one host collective (even when the gathered whole is longer than a chunk);
  // 28 bytes are a chunk and one byte.
  for (const std::int64_t bytes : {std::int64_t{5}, kChunkLength, kChunkLength + 1}) {
    INFO(bytes << " bytes a piece");
    const auto mine = [me](std::int64_t i) { return byte_value(me, i); };
    const Tensor input = make_tensor({bytes}, DType::UInt8, mine);
    const Tensor gathered = Tensor::zeros({size, bytes}, {DType::UInt8});
    staged.all_gather(gathered, input)->wait();
    CHECK(mismatch(gathered, DType::UInt8, {size, bytes}, by_piece(bytes, byte_value)) == "");

    const Tensor at_root = me == root ? Tensor::zeros({size, bytes}, {DType::UInt8}) : Tensor();
    staged.gather(at_root, input, root)->wait();
    if (me == root) CHECK(mismatch(at_root, DType::UInt8, {size, bytes}, by_piece(bytes, byte_value)) == "");

    const Tensor scattered = Tensor::zeros({bytes}, {DType::UInt8});
    const ValueAt root_rows = by_piece(bytes, [root](int r, std::int64_t i) { return byte_value(root, 3 * r + i); });
    staged.scatter(scattered, me == root ? make_tensor({size, bytes}, DType::UInt8, root_rows) : Tensor(), root)
        ->wait();
    CHECK(mismatch(scattered, DType::UInt8, {bytes}, [&](std::int64_t i) { return root_rows(me * bytes + i); }) ==
          "");
  }
}

TEST_CASE("staged chunks: a chunked all_gather into an output of the wrong length fails before sending anything",
          "[staged][chunks][collective]") {
  detail::StagedBackend staged = staged_backend();
  const int me = staged.rank();
  const int size = staged.size();
  const Tensor input = make_tensor({kElements}, DType::Float32, shifted(me, 0));
  // Every rank fails alike, so no host collective was posted that another rank would wait for.
  const std::string error = error_of<InvalidArgument>(
      [&] { staged.all_gather(Tensor::zeros({size * kElements - 1}, {DType::Float32}), input); });
  CHECK(error.find("all_gather") != std::string::npos);
  CHECK(error.find("output") != std::string::npos);
  CHECK(error_of<InvalidArgument>([&] {
          staged.all_gather(Tensor::zeros({size * kElements}, {DType::Float64}), input);
        }).find("float") != std::string::npos);
  // The engine still works: no chunk of the failed calls is waiting in the host backend.
  const Tensor output = Tensor::zeros({size, kElements}, {DType::Float32});
  staged.all_gather(output, input)->wait();
  CHECK(mismatch(output, DType::Float32, {size, kElements}, by_piece(kElements, [](int r, std::int64_t i) {
                   return rank_value(r, i);
                 })) == "");
}
