// Timeouts and Group::abort with every peer alive: a collective that timed out and was dropped is
// abandoned at once rather than waited for, and still completes with the right values once the
// others join; an aborted group releases a waiting thread with the reason and refuses later work,
// while the rest of the context goes on. (A peer that really dies: tests/dist/peer_death.cpp.)
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "comm/abandoned_operations.hpp"
#include "ops_test_support.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kGroupTimeout = std::chrono::milliseconds(2000);

std::int64_t rank_sum(int size, std::int64_t element) {
  std::int64_t sum = 0;
  for (int rank = 0; rank < size; ++rank) sum += static_cast<std::int64_t>(rank_value(rank, element));
  return sum;
}

void check_summed(const Tensor& summed, int size) {
  const auto* values = static_cast<const std::int64_t*>(summed.data_ptr());
  for (std::int64_t i = 0; i < summed.numel(); ++i) CHECK(values[i] == rank_sum(size, i));
}

}  // namespace

TEST_CASE("a collective dropped after its Timeout is abandoned at once and completes when the others join",
          "[faults]") {
  const Group group = all_ranks_with_timeout(kGroupTimeout);
  const Group& world = context().world();
  const Tensor summed = make_tensor({64}, DType::Int64, values_of(group.rank()));
  if (group.rank() == 0) {
    {
      WorkPtr late = dist::all_reduce_async(summed, group);
      CHECK_THROWS_AS(late->wait(), Timeout);  // the others are still in the barrier below
      const auto dropped_at = Clock::now();
      late.reset();
      // Waiting again would take the whole group timeout: the others have not started.
      CHECK(Clock::now() - dropped_at < kGroupTimeout / 2);
    }
    dist::barrier(world);
  } else {
    dist::barrier(world);
    dist::all_reduce(summed, group);
  }
  // Rank 0's abandoned all_reduce has been matched by the others' and finishes on its own.
  dist::barrier(world);
  if (group.rank() == 0) {
    const auto deadline = Clock::now() + kGroupTimeout;
    while (detail::abandoned_operations_held() > 0 && Clock::now() < deadline) std::this_thread::yield();
    CHECK(detail::abandoned_operations_held() == 0);
  }
  check_summed(summed, group.size());
  // Still in step: one more collective, checked everywhere.
  const Tensor again = make_tensor({8}, DType::Int64, values_of(group.rank()));
  dist::all_reduce(again, group);
  check_summed(again, group.size());
}

TEST_CASE("Group::abort releases a waiting thread with the reason and refuses later operations", "[faults]") {
  const Group group = all_ranks_with_timeout(kGroupTimeout);
  const Group& world = context().world();
  // Large enough, and in the memory the group's transport sends from as it is, that the send
  // waits for its receive (no eager delivery) over MPI and over shared memory alike.
  const Tensor payload(group.transport(1, Device::cpu()).allocate_message_buffer(8 << 17, Device::cpu()), 0,
                       DType::Int64, {1 << 17}, {});
  payload.copy_(make_tensor({1 << 17}, DType::Int64, values_of(group.rank())));
  if (group.rank() == 0) {
    WorkPtr send = dist::isend(payload, 1, group);
    auto waiter = std::async(std::launch::async, [&] {
      try {
        send->wait();
        return std::string("the send completed");
      } catch (const BackendError& error) {
        return std::string(error.what());
      } catch (const Timeout&) {
        return std::string("Timeout instead of the abort's error");
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    group.abort("rank 1 stopped answering (test)");
    CHECK_THAT(waiter.get(), Catch::Matchers::Contains("rank 1 stopped answering (test)"));
    send.reset();  // abandoned: the receive below comes only after the world barrier
    CHECK(group.is_aborted());
    CHECK_THROWS_AS(dist::all_reduce(payload, group), BackendError);
    CHECK_THROWS_AS(dist::barrier(group), BackendError);
    CHECK_FALSE(world.is_aborted());
  }
  dist::barrier(world);
  if (group.rank() == 1) {
    // The abandoned send still delivers: rank 1's group was never aborted.
    const Tensor received = Tensor::empty({1 << 17}, {DType::Int64});
    dist::recv(received, 0, group);
    CHECK(mismatch(received, DType::Int64, {1 << 17}, [](std::int64_t i) { return rank_value(0, i); }) == "");
  }
  dist::barrier(world);
}
