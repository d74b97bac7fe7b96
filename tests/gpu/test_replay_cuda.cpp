// A replay buffer sampled onto the GPU (gathered on the host into pinned staging, one upload) and
// extended with CUDA leaves.
#include <catch2/catch.hpp>

#include "../rl/replay/replay_test_support.hpp"

using namespace replay_test;

namespace {

const Device kGpu = Device::cuda(0);

}  // namespace

TEST_CASE("sample onto the GPU gives one consolidated device buffer holding the rows drawn") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 64}, {.seed = 1});
  rb.extend(make_rows(0, 64));
  const ReplaySample s = rb.sample(32, {.device = kGpu});
  REQUIRE(s.batch.is_consolidated());
  REQUIRE(s.batch.storage()->device().is_cuda());
  REQUIRE(s.batch.get("obs").device().is_cuda());
  const TensorTree host = s.batch.to(Device::cpu());
  for (std::int64_t i = 0; i < 32; ++i) REQUIRE(checked_step(host, i) == s.indices[static_cast<std::size_t>(i)]);

  const ReplaySample again = rb.sample(32, {.device = kGpu, .reuse = s.batch.storage()});
  REQUIRE(again.batch.storage() == s.batch.storage());
  const TensorTree host_again = again.batch.to(Device::cpu());
  for (std::int64_t i = 0; i < 32; ++i) REQUIRE(checked_step(host_again, i) == again.indices[static_cast<std::size_t>(i)]);
}

TEST_CASE("extend takes rows whose leaves live on the GPU") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16});
  rb.extend(make_rows(0, 16).to(kGpu));
  for (std::int64_t i = 0; i < 16; ++i) REQUIRE(checked_step(rb.storage(), i) == i);
}
