// The rate limiter (Reverb's MinSize and SampleToInsertRatio) over the buffer's shared counters:
// the side that is ahead waits, a bounded time, and proceeds when another process catches up.
#include <chrono>

#include "replay_test_support.hpp"

using namespace replay_test;
using namespace std::chrono_literals;

TEST_CASE("with MinSize a sample waits until enough rows are in, and times out naming the counters", "[replay][limiter]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 32, .rate_limiter = RateLimiterOptions::min_size(10)},
                                         {.seed = 1, .timeout = 100ms});
  rb.extend(make_rows(0, 5));
  REQUIRE_THROWS_AS(rb.sample(2), Timeout);
  REQUIRE_THROWS_WITH(rb.sample(2), Catch::Contains("a sample of 2 rows") && Catch::Contains("5 rows inserted"));
  REQUIRE(rb.sampled() == 0);
  rb.extend(make_rows(5, 5));
  const ReplaySample s = rb.sample(4);
  for (std::int64_t i = 0; i < 4; ++i) REQUIRE(checked_step(s.batch, i) < 10);
  REQUIRE(rb.sampled() == 4);
}

TEST_CASE("SampleToInsertRatio blocks whichever side is ahead", "[replay][limiter]") {
  ScratchDir dir;
  // One sample per insert once 4 rows are in, within 2 either way: diff in 2..6.
  ReplayBuffer rb = ReplayBuffer::create(
      dir.path(), {.capacity = 64, .rate_limiter = RateLimiterOptions::sample_to_insert_ratio(1.0, 4, 2.0)},
      {.seed = 2, .timeout = 50ms});
  REQUIRE_THROWS_AS(rb.sample(1), Timeout);  // nothing in yet
  rb.extend(make_rows(0, 4));                // diff 4
  rb.extend(make_rows(4, 2));                // diff 6
  REQUIRE_THROWS_WITH(rb.extend(make_rows(6, 1)), Catch::Contains("an extend of 1 rows"));
  REQUIRE(rb.inserted() == 6);
  const ReplaySample s = rb.sample(3);  // diff 3
  for (std::int64_t i = 0; i < 3; ++i) REQUIRE(checked_step(s.batch, i) < 6);
  REQUIRE_THROWS_AS(rb.sample(2), Timeout);  // diff would be 1
  rb.extend(make_rows(6, 1));                // diff 4
  rb.sample(2);                              // diff 2
  REQUIRE(rb.sampled() == 5);
  REQUIRE(rb.inserted() == 7);
}

TEST_CASE("a sampler blocked by the limiter proceeds when another process inserts", "[replay][limiter]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16, .rate_limiter = RateLimiterOptions::min_size(8)},
                                         {.seed = 3, .timeout = 5000ms});
  rb.extend(make_rows(0, 4));
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  if (child == 0) {
    ::usleep(200000);
    int code = 0;
    try {
      ReplayBuffer::open(dir.path()).extend(make_rows(4, 4));
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  REQUIRE(child > 0);
  const ReplaySample s = rb.sample(16);
  const auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE(wait_child(child) == 0);
  REQUIRE(waited >= 150ms);
  REQUIRE(waited < 5000ms);
  for (std::int64_t i = 0; i < 16; ++i) REQUIRE(checked_step(s.batch, i) < 8);
}

TEST_CASE("rate limits that cannot hold are refused at creation", "[replay][limiter]") {
  ScratchDir dir;
  REQUIRE_THROWS_AS(ReplayBuffer::create(dir / "a", {.capacity = 8, .rate_limiter = {.samples_per_insert = 0}}),
                    InvalidArgument);
  REQUIRE_THROWS_AS(
      ReplayBuffer::create(dir / "b", {.capacity = 8, .rate_limiter = RateLimiterOptions::sample_to_insert_ratio(1, 4, -1)}),
      InvalidArgument);
  REQUIRE_THROWS_AS(ReplayBuffer::create(dir / "c", {.capacity = 8, .rate_limiter = RateLimiterOptions::min_size(9)}),
                    InvalidArgument);
}
