// PinnedPool: leases of at least the bytes asked for, freed buffers reused, a bounded cache, and
// leases that outlive their pool. Runs without a GPU, where the buffers are plain host memory.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "core/pinned_pool.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;
using detail::PinnedLease;
using detail::PinnedPool;

TEST_CASE("a lease holds at least the bytes asked for, and never null memory") {
  PinnedPool pool;
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{5000}, std::size_t{1} << 20}) {
    const PinnedLease lease = pool.acquire(bytes);
    REQUIRE(lease.data() != nullptr);
    CHECK(lease.size() >= bytes);
    std::memset(lease.data(), 0x5a, lease.size());  // the whole buffer is writable
  }
}

TEST_CASE("a freed buffer is handed out again for a request of a similar size") {
  PinnedPool pool;
  std::byte* first = nullptr;
  {
    const PinnedLease lease = pool.acquire(10000);
    first = lease.data();
  }
  CHECK(pool.cached_bytes() >= 10000);
  const PinnedLease again = pool.acquire(9000);
  CHECK(again.data() == first);
  CHECK(pool.cached_bytes() == 0);
  // Far smaller requests do not take a buffer many times their size.
  const PinnedLease small = pool.acquire(100);
  CHECK(small.data() != first);
}

TEST_CASE("the pool keeps no more free buffers than its bounds allow") {
  PinnedPool pool({.max_cached_bytes = 3 * 4096, .max_cached_buffers = 2});
  {
    std::vector<PinnedLease> leases;
    for (int i = 0; i < 5; ++i) leases.push_back(pool.acquire(4096));
  }
  CHECK(pool.cached_bytes() == 2 * 4096);
}

TEST_CASE("a lease that outlives its pool frees its buffer when it ends") {
  PinnedLease survivor;
  {
    PinnedPool pool;
    survivor = pool.acquire(4096);
  }
  std::memset(survivor.data(), 1, survivor.size());
  survivor = PinnedLease();
  CHECK(survivor.data() == nullptr);
}

TEST_CASE("a pooled storage returns its buffer once the last tensor viewing it is gone") {
  PinnedPool pool;
  {
    Tensor tensor(pool.storage(64 * sizeof(float)), 0, DType::Float32, {8, 8}, {});
    auto* values = static_cast<float*>(tensor.data_ptr());
    for (int i = 0; i < 64; ++i) values[i] = static_cast<float>(i + 1);
    const Tensor view = tensor.select(0, 7);
    tensor = Tensor();
    CHECK(pool.cached_bytes() == 0);
    CHECK(static_cast<const float*>(view.data_ptr())[7] == 64.0f);
  }
  CHECK(pool.cached_bytes() >= 64 * sizeof(float));
}

TEST_CASE("leases are taken and returned from many threads at once") {
  PinnedPool pool;
  std::atomic<int> overwritten{0};  // Catch's assertions are not thread-safe: count, check after
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &overwritten, t] {
      for (int i = 0; i < 200; ++i) {
        const PinnedLease lease = pool.acquire(static_cast<std::size_t>(4096 * (1 + (i + t) % 3)));
        std::memset(lease.data(), t + 1, lease.size());
        std::this_thread::yield();
        if (static_cast<int>(lease.data()[lease.size() - 1]) != t + 1) ++overwritten;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(overwritten == 0);
  CHECK(pool.cached_bytes() > 0);
}
