// The replay buffer in one process: extend and sample with every element checked, the lazy layout,
// the directory as a memmap tree, wrap-around, layout mismatches and hostile control blocks.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <set>
#include <utility>
#include <vector>

#include "replay_test_support.hpp"
#include "rl/process_identity.hpp"
#include "rl/replay/control_block.hpp"

using namespace replay_test;

TEST_CASE("extend then sample returns rows whose every element matches their step", "[replay]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 64}, {.seed = 7});
  REQUIRE_FALSE(rb.has_layout());
  rb.extend(make_rows(0, 10));
  rb.extend(make_rows(10, 15));
  REQUIRE(rb.has_layout());
  REQUIRE(rb.inserted() == 25);
  REQUIRE(rb.size() == 25);

  const ReplaySample s = rb.sample(200);
  REQUIRE(s.batch.is_consolidated());
  REQUIRE(s.batch.batch_size() == Shape{200});
  REQUIRE(s.batch.get("obs").shape() == Shape{200, 3, 4});
  REQUIRE(s.indices.size() == 200);
  REQUIRE(s.weights.empty());
  std::set<std::int64_t> seen;
  for (std::int64_t i = 0; i < 200; ++i) {
    const std::int64_t step = checked_step(s.batch, i);
    REQUIRE(s.indices[static_cast<std::size_t>(i)] == step);  // one writer, no wrap: row = step
    seen.insert(step);
  }
  REQUIRE(*seen.rbegin() < 25);
  REQUIRE(seen.size() > 20);  // 200 draws from 25 rows miss one with probability < 25 * 0.96^200
}

TEST_CASE("the directory opens with load_memmap and holds the rows written", "[replay]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16});
  rb.extend(make_rows(100, 16));
  const TensorTree loaded = TensorTree::load_memmap(dir.path());
  REQUIRE(loaded.batch_size() == Shape{16});
  REQUIRE(loaded.subtree("next").batch_size() == Shape{16});
  for (std::int64_t i = 0; i < 16; ++i) REQUIRE(checked_step(loaded, i) == 100 + i);
  REQUIRE(rb.storage().get("step").at<std::int64_t>({3}) == 103);
}

TEST_CASE("a ring wraps: later rows replace the oldest, and a tree longer than the ring keeps its tail", "[replay]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 8}, {.seed = 3});
  rb.extend(make_rows(0, 5));
  rb.extend(make_rows(5, 6));  // steps 8..10 go to rows 0..2
  REQUIRE(rb.size() == 8);
  for (int round = 0; round < 20; ++round) {
    const ReplaySample s = rb.sample(16);
    for (std::int64_t i = 0; i < 16; ++i) {
      const std::int64_t step = checked_step(s.batch, i);
      REQUIRE(step >= 3);
      REQUIRE(s.indices[static_cast<std::size_t>(i)] == step % 8);
    }
  }
  rb.extend(make_rows(1000, 20));  // only steps 1012..1019 survive
  const TensorTree& rows = rb.storage();
  std::set<std::int64_t> steps;
  for (std::int64_t i = 0; i < 8; ++i) steps.insert(checked_step(rows, i));
  REQUIRE(steps == std::set<std::int64_t>{1012, 1013, 1014, 1015, 1016, 1017, 1018, 1019});
}

TEST_CASE("a second handle opened by name sees the rows and the layout", "[replay]") {
  ScratchDir dir;
  ReplayBuffer writer = ReplayBuffer::create(dir.path(), {.capacity = 32});
  ReplayBuffer reader = ReplayBuffer::open(dir.path(), {.seed = 11});
  REQUIRE_FALSE(reader.has_layout());
  writer.extend(make_rows(40, 4));
  const ReplaySample s = reader.sample(12);
  for (std::int64_t i = 0; i < 12; ++i) {
    const std::int64_t step = checked_step(s.batch, i);
    REQUIRE((step >= 40 && step < 44));
  }
  REQUIRE(reader.inserted() == 4);
}

TEST_CASE("extend accepts the same structure built in another order and rejects another layout", "[replay]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16});
  rb.extend(make_rows(0, 2));
  const TensorTree first = make_rows(2, 3);
  TensorTree reordered(Shape{3});
  for (const char* key : {"next.done", "trajectory", "next.reward", "step", "obs"}) reordered.set(key, first.get(key));
  rb.extend(reordered);
  for (std::int64_t i = 0; i < 5; ++i) REQUIRE(checked_step(rb.storage(), i) == i);

  TensorTree wrong_dtype = make_rows(5, 1);
  wrong_dtype.set("step", Tensor::zeros({1}, {DType::Int32}));
  REQUIRE_THROWS_WITH(rb.extend(wrong_dtype), Catch::Contains("step") && Catch::Contains("int32"));
  REQUIRE_THROWS_AS(rb.extend(wrong_dtype), SchemaMismatch);
  TensorTree extra = make_rows(5, 1);
  extra.set("extra", Tensor::zeros({1}));
  REQUIRE_THROWS_AS(rb.extend(extra), SchemaMismatch);
  TensorTree missing = make_rows(5, 1);
  missing.erase("obs");
  REQUIRE_THROWS_WITH(rb.extend(missing), Catch::Contains("obs"));
  REQUIRE_THROWS_AS(rb.extend(TensorTree(Shape{1, 2})), InvalidArgument);
  REQUIRE(rb.inserted() == 5);  // nothing was reserved by a refused tree
}

TEST_CASE("create refuses a directory that is not empty, open refuses one without a buffer", "[replay]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir / "a", {.capacity = 4});
  REQUIRE_THROWS_WITH(ReplayBuffer::create(dir / "a", {.capacity = 4}), Catch::Contains("already holds"));
  fs::create_directories(dir / "b");
  std::ofstream(dir / "b" / "x") << "x";
  REQUIRE_THROWS_AS(ReplayBuffer::create(dir / "b", {.capacity = 4}), InvalidArgument);
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir / "b"), InvalidArgument);
  REQUIRE_THROWS_AS(ReplayBuffer::create(dir / "c", {.capacity = 0}), InvalidArgument);
  REQUIRE_THROWS_AS(ReplayBuffer::shared_memory_path("a/b"), InvalidArgument);
  REQUIRE(ReplayBuffer::shared_memory_path("x").parent_path() == "/dev/shm");
}

TEST_CASE("sample waits a bounded time for rows and throws Timeout naming the buffer", "[replay]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 4}, {.timeout = std::chrono::milliseconds(50)});
  REQUIRE_THROWS_AS(rb.sample(1), Timeout);
  REQUIRE_THROWS_WITH(rb.sample(1), Catch::Contains(dir.path().string()));
  REQUIRE_THROWS_AS(rb.sample(0), InvalidArgument);
}

// ---- hostile control blocks and directories --------------------------------------------------------

namespace {

fs::path control_file(const ScratchDir& dir) { return dir.path() / "replay.control"; }

void patch(const fs::path& file, off_t offset, const void* bytes, std::size_t n) {
  const int fd = ::open(file.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes, n, offset) == static_cast<ssize_t>(n));
  ::close(fd);
}

}  // namespace

TEST_CASE("a truncated control block is CorruptData naming its size", "[replay][hostile]") {
  ScratchDir dir;
  { ReplayBuffer::create(dir.path(), {.capacity = 100}).extend(make_rows(0, 3)); }
  const auto full = fs::file_size(control_file(dir));
  fs::resize_file(control_file(dir), full - 8);
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir.path()), CorruptData);
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path()), Catch::Contains("truncated") && Catch::Contains("100 rows"));
  fs::resize_file(control_file(dir), 10);
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path()), Catch::Contains("shorter than its"));
}

TEST_CASE("a control block of a newer format is NotSupported naming its version", "[replay][hostile]") {
  ScratchDir dir;
  { ReplayBuffer::create(dir.path(), {.capacity = 4}); }
  const std::uint32_t version = 7;
  patch(control_file(dir), 8, &version, sizeof version);
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir.path()), NotSupported);
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path()), Catch::Contains("format version 7"));
}

TEST_CASE("damaged control block fields are CorruptData naming the field", "[replay][hostile]") {
  ScratchDir dir;
  { ReplayBuffer::create(dir.path(), {.capacity = 4}); }
  SECTION("magic") {
    const std::uint64_t magic = 42;
    patch(control_file(dir), 0, &magic, sizeof magic);
    REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path()), Catch::Contains("magic"));
  }
  SECTION("a capacity the checksum does not cover") {
    const std::uint64_t capacity = std::uint64_t{1} << 62;
    patch(control_file(dir), 16, &capacity, sizeof capacity);
    REQUIRE_THROWS_AS(ReplayBuffer::open(dir.path()), CorruptData);
    REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path()), Catch::Contains("checksum"));
  }
  SECTION("the layout state") {
    const std::uint32_t state = 99;
    patch(control_file(dir), offsetof(tensortree::detail::ControlHeader, layout_state), &state, sizeof state);
    REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path()), Catch::Contains("layout state 99"));
  }
}

namespace {

using tensortree::detail::ControlHeader;

template <class T>
void patch_field(const ScratchDir& dir, std::size_t offset, T value) {
  patch(control_file(dir), static_cast<off_t>(offset), &value, sizeof value);
}

// A buffer of 100 rows holding steps 0..2, then `patch_it` applied to its control block.
template <class Patch>
void require_refused_at_open(Patch&& patch_it, const std::string& named) {
  ScratchDir dir;
  { ReplayBuffer::create(dir.path(), {.capacity = 100, .prioritized = true}).extend(make_rows(0, 3)); }
  { ReplayBuffer::open(dir.path()); }  // untouched, it opens
  patch_it(dir);
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir.path()), CorruptData);
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path()), Catch::Contains(named));
}

}  // namespace

TEST_CASE("an insert cursor that would wrap the tickets or their sequence numbers is CorruptData at open",
          "[replay][hostile]") {
  for (const std::uint64_t cursor : {std::uint64_t{1} << 63, ~std::uint64_t{0} - 15, ~std::uint64_t{0} - 1,
                                     ~std::uint64_t{0}, (std::uint64_t{1} << 62) + 1}) {
    INFO("cursor " << cursor);
    require_refused_at_open([&](const ScratchDir& dir) { patch_field(dir, offsetof(ControlHeader, cursor), cursor); },
                            "insert cursor " + std::to_string(cursor));
  }
}

TEST_CASE("every header field outside the checksum is checked at open", "[replay][hostile]") {
  const auto huge = ~std::uint64_t{0} - 1;
  SECTION("the sample count") {
    require_refused_at_open([&](const ScratchDir& d) { patch_field(d, offsetof(ControlHeader, samples), huge); },
                            "sample count " + std::to_string(huge));
  }
  SECTION("the fifo cursor ahead of the insert cursor") {
    require_refused_at_open(
        [&](const ScratchDir& d) { patch_field(d, offsetof(ControlHeader, fifo_cursor), std::uint64_t{4}); },
        "fifo cursor 4 is past the insert cursor 3");
  }
  SECTION("the layout lock") {
    require_refused_at_open(
        [&](const ScratchDir& d) { patch_field(d, offsetof(ControlHeader, layout_lock), ~std::uint64_t{0} - 6); },
        "layout lock");
  }
  SECTION("the priority lock") {
    require_refused_at_open(
        [&](const ScratchDir& d) { patch_field(d, offsetof(ControlHeader, priority_lock), std::uint64_t{1} << 60); },
        "priority lock");
  }
  SECTION("the largest priority") {
    require_refused_at_open(
        [&](const ScratchDir& d) { patch_field(d, offsetof(ControlHeader, max_priority), std::nan("")); },
        "largest priority");
  }
  SECTION("the reserved word") {
    require_refused_at_open([&](const ScratchDir& d) { patch_field(d, offsetof(ControlHeader, reserved), 1U); },
                            "reserved");
  }
  SECTION("the unused rest of the header page") {
    require_refused_at_open([&](const ScratchDir& d) { patch_field(d, sizeof(ControlHeader) + 17, std::uint8_t{9}); },
                            "unused");
  }
}

TEST_CASE("an insert cursor damaged while a handle is open is CorruptData at the next extend, never a wrap",
          "[replay][hostile]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 100});
  rb.extend(make_rows(0, 3));
  const std::uint64_t damaged = ~std::uint64_t{0} - 1;
  patch(control_file(dir), offsetof(ControlHeader, cursor), &damaged, sizeof damaged);
  REQUIRE_THROWS_AS(rb.extend(make_rows(3, 3)), CorruptData);
  REQUIRE_THROWS_WITH(rb.extend(make_rows(3, 3)), Catch::Contains("insert cursor " + std::to_string(damaged)));
  REQUIRE(rb.inserted() == damaged);  // not wrapped round to a small ticket
  for (std::int64_t i = 0; i < 3; ++i) REQUIRE(checked_step(rb.storage(), i) == i);
}

TEST_CASE("rows of another layout than the control block records are SchemaMismatch", "[replay][hostile]") {
  ScratchDir dir;
  { ReplayBuffer::create(dir / "a", {.capacity = 4}).extend(make_rows(0, 4)); }
  {
    ReplayBuffer other = ReplayBuffer::create(dir / "b", {.capacity = 4});
    TensorTree rows = make_rows(0, 4);
    rows.set("more", Tensor::zeros({4, 2}));
    other.extend(rows);
  }
  // b's rows under a's control block.
  fs::remove(dir / "b" / "replay.control");
  fs::copy_file(dir / "a" / "replay.control", dir / "b" / "replay.control");
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir / "b"), SchemaMismatch);
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir / "b"), Catch::Contains("layout"));
  // A truncated leaf file is the memmap loader's CorruptData.
  fs::resize_file(dir / "a" / "obs.memmap", 10);
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir / "a"), CorruptData);
}

TEST_CASE("sample gathers into a buffer it is given when that is large enough", "[replay]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16}, {.seed = 12});
  rb.extend(make_rows(0, 16));
  const ReplaySample first = rb.sample(8);
  const ReplaySample second = rb.sample(8, {.reuse = first.batch.storage()});
  REQUIRE(second.batch.storage() == first.batch.storage());
  for (std::int64_t i = 0; i < 8; ++i) REQUIRE(checked_step(second.batch, i) == second.indices[static_cast<std::size_t>(i)]);
  const ReplaySample larger = rb.sample(64, {.reuse = first.batch.storage()});
  REQUIRE(larger.batch.storage() != first.batch.storage());
  for (std::int64_t i = 0; i < 64; ++i) checked_step(larger.batch, i);
}

TEST_CASE("rows of another capacity than the control block records are CorruptData", "[replay][hostile]") {
  ScratchDir dir;
  { ReplayBuffer::create(dir / "a", {.capacity = 4}).extend(make_rows(0, 4)); }
  { ReplayBuffer::create(dir / "b", {.capacity = 8}).extend(make_rows(0, 8)); }
  fs::remove(dir / "b" / "replay.control");
  fs::copy_file(dir / "a" / "replay.control", dir / "b" / "replay.control");
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir / "b"), CorruptData);
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir / "b"), Catch::Contains("capacity of 4") && Catch::Contains("[8]"));
}

namespace {

// Holders no live process is: a pid above any pid_max in use, and the pid of a live process (this
// test's parent) with another start time, as when the holder died and the kernel gave its pid to
// a later process.
std::vector<std::pair<const char*, std::uint64_t>> gone_holders() {
  using namespace tensortree::rl;
  return {{"a dead pid", identity_word({static_cast<std::uint32_t>(kPidMask), 5})},
          {"a reused pid", identity_word({static_cast<std::uint32_t>(::getppid()), kStartMask})}};
}

}  // namespace

TEST_CASE("a priority lock held by a process that is gone, its pid reused or not, is taken over and the trees "
          "rebuilt", "[replay][hostile]") {
  for (const auto& [what, holder] : gone_holders()) {
    INFO(what);
    ScratchDir dir;
    ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 4, .prioritized = true, .alpha = 1, .eps = 0},
                                           {.sampler = SamplerKind::Prioritized, .seed = 5,
                                            .timeout = std::chrono::milliseconds(2000)});
    rb.extend(make_rows(0, 4));
    rb.update_priority(std::vector<std::int64_t>{0, 1, 3}, std::vector<double>{0, 0, 0});
    // The node over rows 0 and 1 is garbage, as a holder killed mid-update could leave it: only a
    // rebuild repairs that node, which the update below (of row 2) does not touch.
    patch_field(dir, offsetof(ControlHeader, priority_lock), holder);
    const double garbage = std::nan("");
    const auto geometry = tensortree::detail::control_geometry(4, 4);
    patch(control_file(dir), static_cast<off_t>(geometry->sum_offset + 2 * sizeof(double)), &garbage, sizeof garbage);
    const auto start = std::chrono::steady_clock::now();
    rb.update_priority(std::vector<std::int64_t>{2}, std::vector<double>{5});
    REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1000));
    const ReplaySample s = rb.sample(20);
    for (std::int64_t i = 0; i < 20; ++i) REQUIRE(checked_step(s.batch, i) == 2);
  }
}

TEST_CASE("a row held by a writer that is gone, its pid reused or not, is taken over at once by the next lap",
          "[replay][hostile]") {
  for (const auto& [what, holder] : gone_holders()) {
    INFO(what);
    ScratchDir dir;
    ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 4}, {.timeout = std::chrono::milliseconds(2000)});
    rb.extend(make_rows(0, 4));  // tickets 0..3 on rows 0..3
    // Ticket 5 (row 1) claimed by `holder`, which never published it; ticket 4 was never claimed.
    const auto geometry = tensortree::detail::control_geometry(4, 0);
    patch_field(dir, geometry->seq_offset + 1 * 8, tensortree::detail::writing_seq(5));
    patch_field(dir, geometry->owner_offset + 1 * 16, holder);
    patch_field(dir, geometry->owner_offset + 1 * 16 + 8, std::uint64_t{6});
    patch_field(dir, offsetof(ControlHeader, cursor), std::uint64_t{6});
    const auto start = std::chrono::steady_clock::now();
    rb.extend(make_rows(100, 4));  // tickets 6..9 on rows 2, 3, 0, 1
    REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1000));
    for (std::int64_t row = 0; row < 4; ++row) REQUIRE(checked_step(rb.storage(), row) == 100 + (row + 2) % 4);
  }
}

TEST_CASE("a buffer in shared memory (/dev/shm) works like one on disk", "[replay]") {
  const fs::path where = ReplayBuffer::shared_memory_path("test-" + std::to_string(::getpid()));
  struct Cleanup {
    fs::path path;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{where};
  ReplayBuffer rb = ReplayBuffer::create(where, {.capacity = 8}, {.seed = 4});
  rb.extend(make_rows(30, 8));
  ReplayBuffer other = ReplayBuffer::open(where, {.seed = 5});
  const ReplaySample s = other.sample(16);
  for (std::int64_t i = 0; i < 16; ++i) REQUIRE(checked_step(s.batch, i) == 30 + s.indices[static_cast<std::size_t>(i)]);
}
