// The replay buffer shared by forked processes: concurrent writers lose and tear no row, a reader
// sampling while writers wrap the ring never sees a torn or overwritten row, and a writer killed
// inside a row blocks nobody and its row is never sampled.
#include <signal.h>

#include <atomic>
#include <set>
#include <utility>
#include <vector>

#include "replay_test_support.hpp"
#include "rl/replay/control_block.hpp"
#include "rl/replay/replay_hooks.hpp"

using namespace replay_test;

namespace {

// Runs fn() in a child that exits 0 when it returns, 1 when it throws.
template <class Fn>
pid_t fork_child(Fn&& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 0;
    try {
      fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), e.what());
      code = 1;
    }
    ::_exit(code);
  }
  REQUIRE(pid > 0);
  return pid;
}

// Writer w extends `rows` rows, steps w * kStride + i, in chunks of 1..7 rows.
constexpr std::int64_t kStride = 100000;
void write_steps(const fs::path& dir, int w, std::int64_t rows) {
  ReplayBuffer rb = ReplayBuffer::open(dir);
  for (std::int64_t i = 0; i < rows;) {
    const std::int64_t k = std::min<std::int64_t>(1 + (i + w) % 7, rows - i);
    rb.extend(make_rows(w * kStride + i, k, w));
    i += k;
  }
}

// A child that extends one row (step `step`) and stops after claiming it, before writing it.
pid_t stop_writer_inside_row(const fs::path& dir, std::int64_t step) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t writer = fork_child([&] {
    static int signal_fd = -1;
    signal_fd = ready[1];
    tensortree::detail::replay_hooks().after_claim = [](std::int64_t, std::int64_t) {
      const char byte = 1;
      (void)!::write(signal_fd, &byte, 1);
      ::pause();  // stopped here, its row claimed and unwritten, until killed
    };
    ReplayBuffer::open(dir).extend(make_rows(step, 1));
  });
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return writer;
}

// Kills and reaps a stopped child when the test ends early (a failed REQUIRE), so nothing is left
// paused holding the test's output open.
struct KilledAtExit {
  pid_t pid;
  ~KilledAtExit() {
    if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
  }
};

void kill_writer_inside_row(const fs::path& dir, std::int64_t step) {
  const pid_t victim = stop_writer_inside_row(dir, step);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  REQUIRE(wait_child(victim) == -SIGKILL);
}

}  // namespace

TEST_CASE("four writer processes extend at once: every row lands whole, none lost", "[replay][processes]") {
  ScratchDir dir;
  constexpr int kWriters = 4;
  constexpr std::int64_t kRows = 1500;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = kWriters * kRows});
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) children.push_back(fork_child([&] { write_steps(dir.path(), w, kRows); }));
  for (const pid_t pid : children) REQUIRE(wait_child(pid) == 0);

  REQUIRE(rb.inserted() == kWriters * kRows);
  const TensorTree& rows = rb.storage();
  std::set<std::int64_t> steps;
  for (std::int64_t i = 0; i < kWriters * kRows; ++i) {
    const std::int64_t step = checked_step(rows, i);
    REQUIRE(rows.get("trajectory").at<std::int64_t>({i}) == step / kStride);
    steps.insert(step);
  }
  REQUIRE(steps.size() == kWriters * kRows);
  REQUIRE(*steps.rbegin() == (kWriters - 1) * kStride + kRows - 1);
}

TEST_CASE("a reader sampling while three writers wrap a small ring sees only whole rows", "[replay][processes]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 64}, {.seed = 5});
  rb.extend(make_rows(0, 64));
  std::vector<pid_t> children;
  for (int w = 1; w <= 3; ++w) children.push_back(fork_child([&] { write_steps(dir.path(), w, 20000); }));
  std::int64_t checked = 0;
  std::int64_t newer = 0;
  std::int64_t bad = 0;
  // Until the writers are done, and at least 200 rounds (the last ones see only the writers' rows).
  for (int round = 0; round < 200 || rb.inserted() < 64 + 3 * 20000; ++round) {
    const ReplaySample s = rb.sample(32);
    for (std::int64_t i = 0; i < 32; ++i) {
      std::int64_t step = 0;
      if (!row_consistent(s.batch, i, step)) ++bad;
      if (step >= kStride) ++newer;
      ++checked;
    }
  }
  for (const pid_t pid : children) REQUIRE(wait_child(pid) == 0);
  INFO(checked << " rows checked, " << newer << " from the writers");
  REQUIRE(bad == 0);
  REQUIRE(newer > 0);
  REQUIRE(rb.inserted() == 64 + 3 * 20000);
  for (std::int64_t i = 0; i < 64; ++i) checked_step(rb.storage(), i);
}

TEST_CASE("a writer killed inside its row blocks nobody and its row is never sampled", "[replay][processes]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16},
                                         {.seed = 9, .timeout = std::chrono::milliseconds(5000)});
  rb.extend(make_rows(0, 10));
  kill_writer_inside_row(dir.path(), 10);

  REQUIRE(rb.inserted() == 11);
  REQUIRE(rb.size() == 11);
  for (int round = 0; round < 50; ++round) {
    const ReplaySample s = rb.sample(20);
    for (std::int64_t i = 0; i < 20; ++i) {
      REQUIRE(s.indices[static_cast<std::size_t>(i)] != 10);
      REQUIRE(checked_step(s.batch, i) < 10);
    }
  }
  // The next lap takes the dead writer's row over at once and publishes it.
  const auto start = std::chrono::steady_clock::now();
  rb.extend(make_rows(100, 16));
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1000));
  // Tickets 11..26 hold steps 100..115; row 10 (the dead writer's) has ticket 26.
  for (std::int64_t i = 0; i < 16; ++i) REQUIRE((checked_step(rb.storage(), i) - 100 + 11) % 16 == i);
  REQUIRE(rb.storage().get("step").at<std::int64_t>({10}) == 115);
}

TEST_CASE("a row a live writer of the previous lap still holds is waited for, a bounded time", "[replay][processes]") {
  using namespace std::chrono_literals;
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 4}, {.timeout = 200ms});
  rb.extend(make_rows(0, 1));
  const pid_t slow = stop_writer_inside_row(dir.path(), 1);  // ticket 1: row 1
  rb.extend(make_rows(2, 3));                                 // rows 2, 3, 0: no wait
  // Ticket 5 is row 1, still held by a live writer: a Timeout naming the row and the writer.
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(rb.extend(make_rows(5, 1)),
                      Catch::Contains("row 1 is still being written by process " + std::to_string(slow)));
  REQUIRE(std::chrono::steady_clock::now() - start >= 200ms);
  REQUIRE(::kill(slow, SIGKILL) == 0);
  REQUIRE(wait_child(slow) == -SIGKILL);
  rb.extend(make_rows(7, 4));  // the dead writer's row is taken over at once
  for (std::int64_t i = 0; i < 4; ++i) REQUIRE(checked_step(rb.storage(), i) >= 7);
}

TEST_CASE("a sample that times out in its copy is not counted by the rate limiter", "[replay][processes][limiter]") {
  using namespace std::chrono_literals;
  ScratchDir dir;
  // A sample of n rows needs inserts - (samples + n) >= 0: one row sampled per row inserted.
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 8, .rate_limiter = {1.0, 0, 0.0}},
                                         {.seed = 3, .timeout = 300ms});
  KilledAtExit slow{stop_writer_inside_row(dir.path(), 0)};  // ticket 0, row 0: reserved, never published
  REQUIRE(rb.inserted() == 1);
  // The limiter lets one row be sampled, but no row is readable: the copy times out.
  REQUIRE_THROWS_AS(rb.sample(1), Timeout);
  REQUIRE(rb.sampled() == 0);
  const pid_t victim = std::exchange(slow.pid, 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  REQUIRE(wait_child(victim) == -SIGKILL);
  rb.extend(make_rows(1, 1));  // ticket 1, row 1: 2 inserted
  // Two rows may be sampled now: the timed-out sample took none of the limiter's allowance.
  const ReplaySample s = rb.sample(2);
  for (std::int64_t i = 0; i < 2; ++i) {
    REQUIRE(s.indices[static_cast<std::size_t>(i)] == 1);
    REQUIRE(checked_step(s.batch, i) == 1);
  }
  REQUIRE(rb.sampled() == 2);
}

TEST_CASE("a fifo reader skips the row of a writer killed inside it", "[replay][processes]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16},
                                         {.sampler = SamplerKind::Fifo, .timeout = std::chrono::milliseconds(5000)});
  rb.extend(make_rows(0, 2));
  kill_writer_inside_row(dir.path(), 2);
  rb.extend(make_rows(3, 2));
  // Tickets 0..3 are taken; 2 (the dead writer's) gives its place to the next ticket, 4.
  const ReplaySample s = rb.sample(4);
  std::vector<std::int64_t> steps;
  for (std::int64_t i = 0; i < 4; ++i) steps.push_back(checked_step(s.batch, i));
  REQUIRE(steps == std::vector<std::int64_t>{0, 1, 4, 3});
}

TEST_CASE("processes that extend a fresh buffer at once agree on one layout", "[replay][processes]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 3 * 200});
  std::vector<pid_t> children;
  for (int w = 0; w < 3; ++w) children.push_back(fork_child([&] { write_steps(dir.path(), w, 200); }));
  for (const pid_t pid : children) REQUIRE(wait_child(pid) == 0);
  std::set<std::int64_t> steps;
  for (std::int64_t i = 0; i < 600; ++i) steps.insert(checked_step(rb.storage(), i));
  REQUIRE(steps.size() == 600);
  // Only the buffer's files are left: no temporary layout directory.
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    REQUIRE(entry.path().filename().string().front() != '.');
  }
}
