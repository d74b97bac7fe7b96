// Groups whose ranks are threads of this process (runtime/in_process_world.hpp): what a Group
// says about itself, which transport serves each peer, point to point through both of them, and
// the failures a rank must survive (Timeout, a wrong length, abort).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "in_process_support.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/error.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

GroupOptions with_host_transport(HostTransport transport, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  GroupOptions options = quick_options(timeout);
  options.host_transport = transport;
  return options;
}

std::string error_of(const std::function<void()>& operation) {
  try {
    operation();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an in-process group gives each thread its rank, the size, the world ranks and the options") {
  const int size = GENERATE(1, 2, 3, 4);
  GroupOptions options = quick_options(std::chrono::milliseconds(12345));
  options.max_message_bytes = 4096;
  PerRank<int> ranks(size);
  run_ranks(size, [&](const Group& group) {
    expect(group.size() == size && group.is_member() && !group.is_aborted(), "size, membership, abort state");
    std::vector<int> world(static_cast<std::size_t>(size));
    std::iota(world.begin(), world.end(), 0);
    expect(group.world_ranks() == world, "world ranks are 0..size-1");
    expect(group.options().timeout == std::chrono::milliseconds(12345) && group.options().max_message_bytes == 4096,
           "the options the group was made with");
    ranks[group.rank()] = group.rank() + 100;
  }, options);
  for (int rank = 0; rank < size; ++rank) CHECK(ranks[rank] == rank + 100);
}

TEST_CASE("threads of one process reach each other through the node-local shared-memory transport, and "
          "themselves through the in-process backend") {
  const int size = GENERATE(2, 3);
  PerRank<std::vector<std::string>> names(size);
  run_ranks(size, [&](const Group& group) {
    for (int peer = 0; peer < group.size(); ++peer) {
      names[group.rank()].push_back(std::string(group.transport(peer, Device::cpu()).name()));
    }
  }, with_host_transport(HostTransport::Auto));
  for (int rank = 0; rank < size; ++rank) {
    for (int peer = 0; peer < size; ++peer) {
      INFO("rank " << rank << ", peer " << peer);
      CHECK(names[rank][static_cast<std::size_t>(peer)] == (peer == rank ? "in-process" : "shared memory (memfd)"));
    }
  }
}

TEST_CASE("the shared-memory transport is a peer transport only: the group's collectives run on the in-process "
          "engine, and the shared-memory transport refuses a peer it does not serve") {
  PerRank<std::vector<std::string>> names(3);
  PerRank<std::string> refusal(3);
  run_ranks(3, [&](const Group& group) {
    names[group.rank()].push_back(std::string(group.collectives(Device::cpu()).name()));
    names[group.rank()].push_back(std::string(group.any_source_transport(Device::cpu()).name()));
    // The own rank is the in-process engine's: the shared-memory transport of a peer refuses it.
    PeerTransport& shared = group.transport((group.rank() + 1) % group.size(), Device::cpu());
    refusal[group.rank()] = error_of([&] {
      shared.send(Tensor::full({2}, 1.0 + group.rank()), group.rank(), 5);
    });
  }, with_host_transport(HostTransport::Auto));
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    CHECK(names[rank] == std::vector<std::string>{"in-process", "shared memory (memfd)"});
    CHECK_THAT(refusal[rank], Catch::Contains("send with rank " + std::to_string(rank)) &&
                                  Catch::Contains("not served through this node's memory"));
  }
}

TEST_CASE("HostTransport::Mpi serves an in-process group with the in-process engine for every peer") {
  PerRank<std::vector<std::string>> names(3);
  run_ranks(3, [&](const Group& group) {
    for (int peer = 0; peer < group.size(); ++peer) {
      names[group.rank()].push_back(std::string(group.transport(peer, Device::cpu()).name()));
    }
    names[group.rank()].push_back(std::string(group.collectives(Device::cpu()).name()));
    names[group.rank()].push_back(std::string(group.any_source_transport(Device::cpu()).name()));
  }, with_host_transport(HostTransport::Mpi));
  for (int rank = 0; rank < 3; ++rank) CHECK(names[rank] == std::vector<std::string>(5, "in-process"));
}

TEST_CASE("point to point between threads keeps each sender's messages in order on a tag, over either transport") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  const std::int64_t length = GENERATE(5, 20000);  // inline in a node-local frame, and through a shared region
  constexpr int kMessages = 6;
  run_ranks(2, [&](const Group& group) {
    if (group.rank() == 0) {
      std::vector<WorkPtr> sends;
      std::vector<Tensor> sent;
      for (int m = 0; m < kMessages; ++m) {
        sent.push_back(make_tensor({length}, DType::Float32, [m](std::int64_t i) { return rank_value(m, i); }));
        sends.push_back(dist::isend(sent.back(), 1, group, {.tag = 7}));
      }
      for (const WorkPtr& work : sends) work->wait();
      return;
    }
    std::vector<Tensor> received;
    std::vector<WorkPtr> receives;
    for (int m = 0; m < kMessages; ++m) {
      received.push_back(Tensor::zeros({length}, {DType::Float32}));
      receives.push_back(dist::irecv(received.back(), 0, group, {.tag = 7}));
    }
    for (int m = kMessages - 1; m >= 0; --m) receives[static_cast<std::size_t>(m)]->wait();
    for (int m = 0; m < kMessages; ++m) {
      expect_elements(received[static_cast<std::size_t>(m)], length, [m](std::int64_t i) { return rank_value(m, i); },
                      "message " + std::to_string(m), group.rank());
    }
  }, with_host_transport(transport));
}

TEST_CASE("a receive from any source takes one message from every sender and names it") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  const int size = GENERATE(3, 4);
  run_ranks(size, [&](const Group& group) {
    if (group.rank() != 0) {
      dist::send(make_tensor({9}, DType::Int64, [&](std::int64_t i) { return rank_value(group.rank(), i); }), 0, group,
                 {.tag = 3});
      return;
    }
    std::vector<int> seen;
    for (int m = 1; m < group.size(); ++m) {
      const Tensor received = Tensor::zeros({9}, {DType::Int64});
      const int source = dist::recv_any(received, group, {.tag = 3});
      expect_elements(received, 9, [source](std::int64_t i) { return rank_value(source, i); },
                      "the message of rank " + std::to_string(source), 0);
      seen.push_back(source);
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int> everyone(static_cast<std::size_t>(group.size() - 1));
    std::iota(everyone.begin(), everyone.end(), 1);
    expect(seen == everyone, "every sender was received once");
  }, with_host_transport(transport));
}

TEST_CASE("a receive nobody answers ends with Timeout within the group's timeout") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  const auto timeout = std::chrono::milliseconds(200);
  std::string message;
  std::chrono::steady_clock::duration waited{};
  run_ranks(2, [&](const Group& group) {
    if (group.rank() != 1) return;
    const Tensor never = Tensor::zeros({4}, {DType::Float32});
    const auto start = std::chrono::steady_clock::now();
    try {
      dist::recv(never, 0, group, {.tag = 11});
    } catch (const Timeout& error) {
      message = error.what();
    }
    waited = std::chrono::steady_clock::now() - start;
  }, with_host_transport(transport, timeout));
  INFO(message);
  CHECK(message.find("rank 1") != std::string::npos);
  CHECK(message.find("200 ms") != std::string::npos);
  CHECK(waited >= timeout);
  CHECK(waited < timeout * 10);
}

TEST_CASE("a receive of the wrong length is InvalidArgument naming the ranks, the tag and both lengths") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  std::string message;
  run_ranks(2, [&](const Group& group) {
    if (group.rank() == 0) {
      dist::send(make_tensor({7}, DType::Float32, [](std::int64_t i) { return rank_value(0, i); }), 1, group, {.tag = 5});
      return;
    }
    const Tensor longer = Tensor::zeros({9}, {DType::Float32});
    message = error_of([&] {
      try {
        dist::recv(longer, 0, group, {.tag = 5});
      } catch (const InvalidArgument&) {
        throw;
      } catch (const std::exception& other) {
        throw std::runtime_error(std::string("not InvalidArgument: ") + other.what());
      }
    });
  }, with_host_transport(transport));
  CHECK(message.find("rank 1 received 7 elements from rank 0 (tag 5) into a tensor of 9 elements") != std::string::npos);
}

TEST_CASE("Group::abort ends a wait in flight with BackendError and refuses later operations") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  std::string in_flight;
  std::string later;
  run_ranks(2, [&](const Group& group) {
    if (group.rank() != 1) return;
    const Tensor never = Tensor::zeros({4}, {DType::Float32});
    const WorkPtr receive = dist::irecv(never, 0, group, {.tag = 2});
    group.abort("the test gave up");
    in_flight = error_of([&] { receive->wait(); });
    later = error_of([&] { dist::send(never, 0, group); });
    expect(group.is_aborted(), "the group says it was aborted");
  }, with_host_transport(transport, std::chrono::minutes(5)));
  CHECK(in_flight.find("the test gave up") != std::string::npos);
  CHECK(later.find("the test gave up") != std::string::npos);
}

TEST_CASE("a rank that fails ends the in-process world at once and its error reaches the caller") {
  const auto start = std::chrono::steady_clock::now();
  const auto failing = [](const Group& group) {
    if (group.rank() == 2) throw InvalidArgument("rank 2 gives up");
    dist::barrier(group);  // would wait for rank 2 for the whole timeout
  };
  CHECK_THROWS_WITH(run_ranks(3, failing, quick_options(std::chrono::minutes(5))), "rank 2 gives up");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("every operation a group posts carries its name and its number, collectives and point to point counted apart") {
  run_ranks(2, [](const Group& group) {
    const Tensor values = make_tensor({5}, DType::Float32, [&](std::int64_t i) { return rank_value(group.rank(), i); });
    const WorkPtr first = dist::all_reduce_async(values, group);
    const WorkPtr second = dist::barrier_async(group);
    const Tensor message = Tensor::zeros({3}, {DType::Int32});
    const WorkPtr p2p = group.rank() == 0 ? dist::isend(message, 1, group) : dist::irecv(message, 0, group);
    const WorkPtr third = dist::broadcast_async(values, 0, group);
    for (const WorkPtr& work : {first, second, p2p, third}) work->wait();
    expect(first->op() == "all_reduce" && first->sequence() == 1, "all_reduce is collective #1");
    expect(second->op() == "barrier" && second->sequence() == 2, "barrier is collective #2");
    expect(p2p->op() == (group.rank() == 0 ? "send" : "recv") && p2p->sequence() == 1, "the first point to point is #1");
    expect(third->op() == "broadcast" && third->sequence() == 3, "broadcast is collective #3");
  });
}

TEST_CASE("a Timeout and an error of a group's operation begin with its name and number") {
  const auto timeout = std::chrono::milliseconds(100);
  std::string timed_out;
  std::string failed;
  run_ranks(2, [&](const Group& group) {
    const Tensor seven = make_tensor({7}, DType::Float32, [&](std::int64_t i) { return rank_value(group.rank(), i); });
    if (group.rank() == 0) {
      dist::send(seven, 1, group, {.tag = 3});
      return;
    }
    const WorkPtr never = dist::irecv(Tensor::zeros({4}, {DType::Float32}), 0, group, {.tag = 4});
    timed_out = error_of([&] { never->wait(timeout); });
    failed = error_of([&] { dist::recv(Tensor::zeros({9}, {DType::Float32}), 0, group, {.tag = 3}); });
    group.abort("the test is over");
  }, quick_options(std::chrono::seconds(20)));
  INFO(timed_out);
  INFO(failed);
  CHECK(timed_out.rfind("recv #1: recv did not complete within 100 ms", 0) == 0);
  CHECK(failed.rfind("recv #2: rank 1 received 7 elements from rank 0 (tag 3)", 0) == 0);
}

TEST_CASE("debug mode's message says after how many of the group's collectives the calls differ") {
  GroupOptions options = quick_options();
  options.debug_checks = true;
  std::vector<std::string> messages(2);
  run_ranks(2, [&](const Group& group) {
    const Tensor values = make_tensor({4}, DType::Float32, [&](std::int64_t i) { return rank_value(group.rank(), i); });
    dist::all_reduce(values, group);  // the debug round and the all_reduce: two collectives
    messages[static_cast<std::size_t>(group.rank())] = error_of([&] {
      if (group.rank() == 0) {
        dist::all_reduce(values, group);
      } else {
        dist::broadcast(values, 0, group);
      }
    });
  }, options);
  INFO(messages[0]);
  INFO(messages[1]);
  CHECK(messages[0].rfind("all_reduce after 2 collectives (TENSORTREE_DISTRIBUTED_DEBUG=DETAIL): the ranks' calls "
                          "differ: operation: all_reduce on rank 0, broadcast on rank 1", 0) == 0);
  CHECK(messages[1].rfind("broadcast after 2 collectives (TENSORTREE_DISTRIBUTED_DEBUG=DETAIL)", 0) == 0);
}

TEST_CASE("debug mode: a send of float64 into a float32 receiver of the same bytes is InvalidArgument on the "
          "receiver naming both dtypes and shapes") {
  GroupOptions options = quick_options();
  options.debug_checks = true;
  std::string direct;
  std::string any;
  std::string batched;
  run_ranks(2, [&](const Group& group) {
    const Tensor sent = make_tensor({3}, DType::Float64, [&](std::int64_t i) { return rank_value(0, i); });
    const Tensor received = Tensor::zeros({6}, {DType::Float32});
    if (group.rank() == 0) {
      dist::send(sent, 1, group, {.tag = 1});
      dist::send(sent, 1, group, {.tag = 2});
      const P2POp op{P2POp::Kind::Send, sent, 1, 3};
      dist::batch_isend_irecv(std::span(&op, 1), group)->wait();
    } else {
      direct = error_of([&] { dist::recv(received, 0, group, {.tag = 1}); });
      any = error_of([&] { dist::recv_any(received, group, {.tag = 2}); });
      const P2POp op{P2POp::Kind::Recv, received, 0, 3};
      batched = error_of([&] { dist::batch_isend_irecv(std::span(&op, 1), group)->wait(); });
    }
    // Matching tensors still arrive whole, with their values, on the same group.
    const Tensor values = make_tensor({2, 3}, DType::Float64, [&](std::int64_t i) { return rank_value(0, i); });
    if (group.rank() == 0) {
      dist::send(values, 1, group, {.tag = 4});
    } else {
      const Tensor landing = Tensor::zeros({2, 3}, {DType::Float64});
      expect(dist::recv_any(landing, group, {.tag = 4}) == 0, "the sender of a matching receive");
      expect_elements(landing, 6, [](std::int64_t i) { return rank_value(0, i); }, "a matching receive", 1);
    }
  }, options);
  INFO(direct);
  INFO(any);
  INFO(batched);
  const std::string expected = "on rank 1 (TENSORTREE_DISTRIBUTED_DEBUG=DETAIL): rank 0 sent float64 [3] (24 bytes) "
                               "but this rank receives into float32 [6] (24 bytes)";
  CHECK_THAT(direct, Catch::Contains("recv #1: recv " + expected));
  CHECK_THAT(any, Catch::Contains("recv #2: recv " + expected));
  CHECK_THAT(batched, Catch::Contains("batch_isend_irecv " + expected));
}

TEST_CASE("debug mode: a receive of another size names the sender's dtype and shape, not only the lengths") {
  GroupOptions options = quick_options();
  options.debug_checks = true;
  std::string message;
  run_ranks(2, [&](const Group& group) {
    if (group.rank() == 0) {
      dist::send(make_tensor({2, 2}, DType::Int64, [](std::int64_t i) { return i + 1.0; }), 1, group);
    } else {
      message = error_of([&] { dist::recv(Tensor::zeros({3}, {DType::Int64}), 0, group); });
    }
    group.abort("the test is over");
  }, options);
  INFO(message);
  CHECK_THAT(message, Catch::Contains("rank 0 sent int64 [2, 2] (32 bytes) but this rank receives into int64 [3]"));
}
