// Checkpoints: a copy that open() resumes from (rows, cursor, priorities, limiter counts), taken
// while writer processes keep writing, and crash-safe: a checkpoint killed mid-write leaves the
// previous one whole.
#include <signal.h>

#include <chrono>
#include <random>
#include <set>

#include "replay_test_support.hpp"
#include "rl/replay/control_block.hpp"

using namespace replay_test;
using namespace std::chrono_literals;

namespace {

// Every row the buffer at `dir` holds published is whole; returns how many it holds.
std::int64_t check_buffer(const fs::path& dir) {
  ReplayBuffer rb = ReplayBuffer::open(dir, {.timeout = 1000ms});
  const tensortree::detail::ControlBlock control = tensortree::detail::ControlBlock::open(dir);
  const TensorTree& rows = rb.storage();
  std::int64_t published = 0;
  for (std::int64_t i = 0; i < rb.capacity(); ++i) {
    if (!tensortree::detail::is_published(control.seq(i).load())) continue;
    std::int64_t step = 0;
    INFO("row " << i);
    REQUIRE(row_consistent(rows, i, step));
    ++published;
  }
  return published;
}

}  // namespace

TEST_CASE("a checkpoint reopens with its rows, cursor, priorities and limiter counts", "[replay][checkpoint]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir / "live",
                                         {.capacity = 16, .prioritized = true, .alpha = 1.0, .eps = 0,
                                          .rate_limiter = RateLimiterOptions::min_size(2)},
                                         {.sampler = SamplerKind::Prioritized, .seed = 1});
  rb.extend(make_rows(0, 10));
  std::vector<std::int64_t> rows(10);
  std::vector<double> priorities(10, 0.0);
  for (std::int64_t i = 0; i < 10; ++i) rows[static_cast<std::size_t>(i)] = i;
  priorities[3] = 1;
  priorities[7] = 3;
  rb.update_priority(rows, priorities);
  rb.sample(4);
  const CheckpointInfo info = rb.checkpoint(dir / "ckpt");
  REQUIRE(info.inserted == 10);
  REQUIRE(info.sampled == 4);
  REQUIRE(info.rows == 10);
  rb.extend(make_rows(10, 6));  // after the checkpoint: not in it

  ReplayBuffer resumed = ReplayBuffer::open(dir / "ckpt", {.sampler = SamplerKind::Prioritized, .seed = 2});
  REQUIRE(resumed.inserted() == 10);
  REQUIRE(resumed.sampled() == 4);
  for (std::int64_t i = 0; i < 10; ++i) REQUIRE(checked_step(resumed.storage(), i) == i);
  std::int64_t threes = 0;
  for (int round = 0; round < 20; ++round) {
    const ReplaySample s = resumed.sample(100);
    for (std::int64_t i = 0; i < 100; ++i) {
      const std::int64_t step = checked_step(s.batch, i);
      REQUIRE((step == 3 || step == 7));
      threes += step == 3 ? 1 : 0;
    }
  }
  REQUIRE(std::abs(static_cast<double>(threes) - 500.0) < 5 * std::sqrt(2000 * 0.25 * 0.75));
  REQUIRE(resumed.sampled() == 2004);
  // It goes on where the checkpoint left off, and is also a TensorDict directory.
  resumed.extend(make_rows(10, 1));
  REQUIRE(resumed.storage().get("step").at<std::int64_t>({10}) == 10);
  REQUIRE(checked_step(TensorTree::load_memmap(dir / "ckpt"), 10) == 10);
}

TEST_CASE("checkpoints taken while two processes write hold only whole rows", "[replay][checkpoint]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir / "live", {.capacity = 256});
  rb.extend(make_rows(0, 256));
  std::vector<pid_t> writers;
  for (int w = 1; w <= 2; ++w) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        ReplayBuffer mine = ReplayBuffer::open(dir / "live");
        for (std::int64_t i = 0; i < 30000; i += 3) mine.extend(make_rows(w * 100000 + i, 3, w));
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    REQUIRE(pid > 0);
    writers.push_back(pid);
  }
  for (int c = 0; c < 5; ++c) {
    const CheckpointInfo info = rb.checkpoint(dir / "ckpt", {.durable = false});
    INFO("checkpoint " << c << " at cursor " << info.inserted);
    REQUIRE(info.rows <= 256);
    REQUIRE(check_buffer(dir / "ckpt") == info.rows);
    REQUIRE(info.rows > 0);
  }
  for (const pid_t pid : writers) REQUIRE(wait_child(pid) == 0);
  const CheckpointInfo last = rb.checkpoint(dir / "ckpt");
  REQUIRE(last.rows == 256);
  REQUIRE(last.inserted == 256 + 2 * 30000);
}

TEST_CASE("a checkpoint killed mid-write leaves the previous checkpoint whole", "[replay][checkpoint]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir / "live", {.capacity = 512});
  rb.extend(make_rows(0, 512));
  std::mt19937 rng(7);
  for (int kill = 0; kill < 20; ++kill) {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
      ReplayBuffer mine = ReplayBuffer::open(dir / "live");
      for (std::int64_t i = 0;; i += 64) {
        mine.extend(make_rows(1000 + i, 64));
        mine.checkpoint(dir / "ckpt", {.durable = false});
        const char byte = 1;
        if (i == 0) (void)!::write(ready[1], &byte, 1);
      }
    }
    REQUIRE(child > 0);
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);
    ::close(ready[0]);
    ::close(ready[1]);
    ::usleep(std::uniform_int_distribution<unsigned>(0, 20000)(rng));
    REQUIRE(::kill(child, SIGKILL) == 0);
    REQUIRE(wait_child(child) == -SIGKILL);
    // Every row the checkpoint holds is whole (check_buffer). Rows an earlier child was killed
    // while extending stay unpublished in the live buffer until the ring comes round to them, and
    // a checkpoint leaves them out: each kill before this child's checkpoints may cost 64.
    REQUIRE(check_buffer(dir / "ckpt") >= 512 - 64 * kill);
  }
  // The next checkpoint clears what the killed ones left beside it.
  rb.checkpoint(dir / "ckpt");
  std::int64_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++entries;
  REQUIRE(entries == 2);
}
