// What a user is told and where things land: one setting makes a buffer prioritized, open of a
// directory without a buffer says to create it, a failed create leaves nothing behind, one naming
// rule for buffers and weight publications in shared memory, and sample's bounded wait.
#include <chrono>
#include <set>
#include <vector>

#include "replay_test_support.hpp"
#include "tensortree/weights.hpp"

using namespace replay_test;

namespace {

// A name in /dev/shm that no other test or run uses, removed (whatever it became) at the end.
struct SharedMemoryName {
  std::string name = "tt-replay-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}());
  ~SharedMemoryName() {
    std::error_code ignored;
    fs::remove_all(fs::path("/dev/shm") / ("tensortree-replay-" + name), ignored);
    fs::remove_all(fs::path("/dev/shm") / ("tensortree-weights-" + name), ignored);
  }
};

}  // namespace

TEST_CASE("a buffer created with the Prioritized sampler keeps priorities: one setting is enough",
          "[replay][messages]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 8, .alpha = 1.0, .eps = 0},
                                         {.sampler = SamplerKind::Prioritized, .seed = 21});
  rb.extend(make_rows(0, 8));
  rb.update_priority(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, std::vector<double>{0, 0, 0, 5, 0, 0, 0, 0});
  ReplayBuffer other = ReplayBuffer::open(dir.path(), {.sampler = SamplerKind::Prioritized, .seed = 22});
  for (ReplayBuffer* handle : {&rb, &other}) {
    const ReplaySample s = handle->sample(16);
    REQUIRE(s.weights.size() == 16);
    for (std::int64_t i = 0; i < 16; ++i) {
      REQUIRE(s.indices[static_cast<std::size_t>(i)] == 3);
      REQUIRE(checked_step(s.batch, i) == 3);
      REQUIRE(s.weights[static_cast<std::size_t>(i)] == 1.0);
    }
  }
}

TEST_CASE("the Prioritized sampler on a buffer created without priorities names the remedy", "[replay][messages]") {
  ScratchDir dir;
  { ReplayBuffer::create(dir.path(), {.capacity = 4}); }
  REQUIRE_THROWS_AS(ReplayBuffer::open(dir.path(), {.sampler = SamplerKind::Prioritized}), InvalidArgument);
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path(), {.sampler = SamplerKind::Prioritized}),
                      Catch::Contains("created without priorities") && Catch::Contains(".prioritized = true"));
}

TEST_CASE("open of a directory without a buffer says to create it first", "[replay][messages]") {
  ScratchDir dir;
  fs::create_directories(dir / "empty");
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "x") << "x";
  for (const fs::path& where : {dir / "empty", dir / "other", dir / "absent"}) {
    INFO(where);
    REQUIRE_THROWS_AS(ReplayBuffer::open(where), InvalidArgument);
    REQUIRE_THROWS_WITH(ReplayBuffer::open(where),
                        Catch::Contains("'" + where.string() + "' is not a replay buffer (no replay.control): "
                                        "create it first") &&
                            !Catch::Contains("OS error"));
  }
  REQUIRE_FALSE(fs::exists(dir / "absent"));
}

TEST_CASE("a create that fails leaves no directory behind", "[replay][messages]") {
  SharedMemoryName shm;
  const fs::path where = ReplayBuffer::shared_memory_path(shm.name);
  REQUIRE_THROWS_AS(ReplayBuffer::create(where, {.capacity = 0}), InvalidArgument);
  REQUIRE_FALSE(fs::exists(where));
  ScratchDir dir;
  REQUIRE_THROWS_AS(ReplayBuffer::create(dir / "a" / "b", {.capacity = 4, .alpha = -1}), InvalidArgument);
  REQUIRE_FALSE(fs::exists(dir / "a"));
  // A directory that was there before stays, as empty as it was.
  fs::create_directories(dir / "mine");
  REQUIRE_THROWS_AS(ReplayBuffer::create(dir / "mine", {.capacity = -5}), InvalidArgument);
  REQUIRE(fs::is_empty(dir / "mine"));
  ReplayBuffer rb = ReplayBuffer::create(dir / "mine", {.capacity = 4});
  rb.extend(make_rows(0, 4));
  REQUIRE(checked_step(rb.sample(1).batch, 0) >= 0);
}

TEST_CASE("a replay buffer and a weight publication follow one rule: /dev/shm/tensortree-<kind>-<name>",
          "[replay][messages]") {
  SharedMemoryName shm;
  const fs::path replay = fs::path("/dev/shm") / ("tensortree-replay-" + shm.name);
  const fs::path weights = fs::path("/dev/shm") / ("tensortree-weights-" + shm.name);
  REQUIRE(ReplayBuffer::shared_memory_path(shm.name) == replay);
  REQUIRE(WeightPublisher::shared_memory_path(shm.name) == weights);
  for (const std::string bad : {"a/b", "..", ""}) {
    REQUIRE_THROWS_AS(ReplayBuffer::shared_memory_path(bad), InvalidArgument);
    REQUIRE_THROWS_AS(WeightPublisher::shared_memory_path(bad), InvalidArgument);
  }
  // One name for both, side by side: the buffer's directory and the publication's file.
  ReplayBuffer rb = ReplayBuffer::create(replay, {.capacity = 4});
  rb.extend(make_rows(0, 4));
  WeightPublisher publisher(shm.name);
  TensorTree params;
  Tensor w = Tensor::empty({5}, {DType::Float32});
  for (std::int64_t i = 0; i < 5; ++i) w.data<float>()[i] = static_cast<float>(i) + 0.5F;
  params.set("w", w);
  REQUIRE(publisher.publish(params) == 1);
  REQUIRE(fs::path(publisher.path()) == weights);
  REQUIRE(fs::is_regular_file(weights));
  const auto [version, copy] = WeightSubscriber(shm.name).latest_copy();
  REQUIRE(version == 1);
  for (std::int64_t i = 0; i < 5; ++i) REQUIRE(copy.get("w").at<float>({i}) == static_cast<float>(i) + 0.5F);
  REQUIRE(checked_step(ReplayBuffer::open(replay).sample(1).batch, 0) >= 0);
}

TEST_CASE("sample on an empty buffer waits the handle's timeout and says which setting that is",
          "[replay][messages]") {
  using namespace std::chrono_literals;
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 4}, {.timeout = 120ms});
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(rb.sample(2), Catch::Contains("no row was inserted") && Catch::Contains("within 120 ms") &&
                                        Catch::Contains("ReplayOpenOptions::timeout"));
  REQUIRE(std::chrono::steady_clock::now() - start >= 120ms);
}
