// The samplers' distributions (fixed seeds, bounds of several standard deviations), prioritized
// weights as TorchRL computes them, slices that never cross a trajectory's end, and draws without
// replacement that visit every row once per epoch.
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "replay_test_support.hpp"

using namespace replay_test;

namespace {

// |count - n p| within 5 standard deviations of a binomial(n, p).
void require_binomial(std::int64_t count, std::int64_t n, double p) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(mean * (1 - p));
  INFO("count " << count << ", expected " << mean << " +- " << 5 * sd);
  REQUIRE(std::abs(static_cast<double>(count) - mean) <= 5 * sd + 1);
}

}  // namespace

TEST_CASE("uniform draws every published row about equally often", "[replay][samplers]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 32}, {.seed = 1});
  rb.extend(make_rows(0, 20));
  std::vector<std::int64_t> counts(20);
  constexpr std::int64_t kDraws = 40000;
  for (std::int64_t b = 0; b < kDraws / 250; ++b) {
    const ReplaySample s = rb.sample(250);
    for (const std::int64_t step : checked_steps(s.batch)) ++counts[static_cast<std::size_t>(step)];
  }
  for (const std::int64_t c : counts) require_binomial(c, kDraws, 1.0 / 20);
}

TEST_CASE("prioritized draws row i with probability (p_i + eps)^alpha / sum, weights (p_i / p_min)^-beta",
          "[replay][samplers]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 8, .prioritized = true, .alpha = 0.7, .eps = 0.01},
                                         {.sampler = SamplerKind::Prioritized, .beta = 0.5, .seed = 2});
  rb.extend(make_rows(0, 8));
  const std::vector<std::int64_t> rows{0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<double> priorities{1, 2, 3, 4, 0, 6, 7, 8};
  rb.update_priority(rows, priorities);
  std::vector<double> stored;
  double total = 0;
  for (const double p : priorities) total += stored.emplace_back(std::pow(p + 0.01, 0.7));
  const double min = std::pow(0.01, 0.7);

  std::vector<std::int64_t> counts(8);
  constexpr std::int64_t kDraws = 40000;
  for (std::int64_t b = 0; b < kDraws / 200; ++b) {
    const ReplaySample s = rb.sample(200);
    REQUIRE(s.weights.size() == 200);
    const std::vector<std::int64_t> steps = checked_steps(s.batch);
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < 200; ++i) {
      const auto row = static_cast<std::size_t>(s.indices[i]);
      const double weight = std::pow(stored[row] / min, -0.5);
      wrong += row == static_cast<std::size_t>(steps[i]) && std::abs(s.weights[i] - weight) <= 1e-12 * weight ? 0 : 1;
      ++counts[row];
    }
    REQUIRE(wrong == 0);
  }
  for (std::size_t r = 0; r < 8; ++r) {
    INFO("row " << r);
    require_binomial(counts[r], kDraws, stored[r] / total);
  }
}

TEST_CASE("prioritized gives new rows the largest priority so far and never draws unpublished rows",
          "[replay][samplers]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 16, .prioritized = true, .alpha = 1.0, .eps = 0},
                                         {.sampler = SamplerKind::Prioritized, .seed = 4});
  rb.extend(make_rows(0, 4));
  const std::vector<std::int64_t> rows{0, 1, 2, 3};
  rb.update_priority(rows, std::vector<double>{1, 1, 1, 9});
  rb.extend(make_rows(4, 1));  // enters at priority 9: as likely as row 3
  std::vector<std::int64_t> counts(16);
  constexpr std::int64_t kDraws = 20000;
  for (std::int64_t b = 0; b < kDraws / 500; ++b) {
    const ReplaySample s = rb.sample(500);
    for (const std::int64_t step : checked_steps(s.batch)) ++counts[static_cast<std::size_t>(step)];
  }
  require_binomial(counts[4], kDraws, 9.0 / 21);
  require_binomial(counts[3], kDraws, 9.0 / 21);
  require_binomial(counts[0], kDraws, 1.0 / 21);
  for (std::size_t r = 5; r < 16; ++r) REQUIRE(counts[r] == 0);
  REQUIRE_THROWS_AS(rb.update_priority(rows, std::vector<double>{1, -1, 1, 1}), InvalidArgument);
  REQUIRE_THROWS_AS(rb.update_priority(std::vector<std::int64_t>{16}, std::vector<double>{1}), InvalidArgument);
}

TEST_CASE("the prioritized sampler needs a buffer with priorities", "[replay][samplers]") {
  ScratchDir dir;
  { ReplayBuffer::create(dir.path(), {.capacity = 4}); }
  REQUIRE_THROWS_WITH(ReplayBuffer::open(dir.path(), {.sampler = SamplerKind::Prioritized}),
                      Catch::Contains("priorities"));
}

TEST_CASE("slices are consecutive steps of one trajectory and never cross its end", "[replay][samplers]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 64},
                                         {.sampler = SamplerKind::Slice, .slice_length = 4, .seed = 6});
  // Trajectories of 3 (too short for a slice), 6, 2, 9, 5 steps, back to back.
  const std::vector<std::int64_t> lengths{3, 6, 2, 9, 5};
  std::int64_t step = 0;
  std::map<std::int64_t, std::int64_t> trajectory_of_step;
  for (std::size_t t = 0; t < lengths.size(); ++t) {
    rb.extend(make_rows(step, lengths[t], static_cast<std::int64_t>(t)));
    for (std::int64_t i = 0; i < lengths[t]; ++i) trajectory_of_step[step + i] = static_cast<std::int64_t>(t);
    step += lengths[t];
  }
  std::set<std::int64_t> starts;
  for (int round = 0; round < 200; ++round) {
    const ReplaySample s = rb.sample(16);
    for (std::int64_t slice = 0; slice < 4; ++slice) {
      const std::int64_t first = checked_step(s.batch, slice * 4);
      starts.insert(first);
      const std::int64_t trajectory = trajectory_of_step.at(first);
      REQUIRE(trajectory != 0);
      REQUIRE(trajectory != 2);
      for (std::int64_t j = 0; j < 4; ++j) {
        const std::int64_t i = slice * 4 + j;
        REQUIRE(checked_step(s.batch, i) == first + j);
        REQUIRE(s.batch.get("trajectory").at<std::int64_t>({i}) == trajectory);
        REQUIRE(s.indices[static_cast<std::size_t>(i)] == first + j);
      }
    }
  }
  // Every valid start appears: 3 in the 6-step trajectory, 6 in the 9-step one, 2 in the 5-step one.
  REQUIRE(starts == std::set<std::int64_t>{3, 4, 5, 11, 12, 13, 14, 15, 16, 20, 21});
  REQUIRE_THROWS_AS(rb.sample(6), InvalidArgument);
}

TEST_CASE("without replacement draws each row once per epoch", "[replay][samplers]") {
  ScratchDir dir;
  ReplayBuffer rb = ReplayBuffer::create(dir.path(), {.capacity = 32},
                                         {.sampler = SamplerKind::WithoutReplacement, .seed = 8});
  rb.extend(make_rows(0, 24));
  for (int epoch = 0; epoch < 5; ++epoch) {
    std::set<std::int64_t> seen;
    for (int part = 0; part < 3; ++part) {
      const ReplaySample s = rb.sample(8);
      for (std::int64_t i = 0; i < 8; ++i) REQUIRE(seen.insert(checked_step(s.batch, i)).second);
    }
    REQUIRE(seen.size() == 24);
  }
  REQUIRE_THROWS_AS(rb.sample(25), InvalidArgument);
}

namespace {

// The steps `batches` samples of `batch` rows drew, in draw order, every element of every row checked
// (rows were written with step == storage row).
std::vector<std::int64_t> draw_steps(ReplayBuffer& rb, std::int64_t batch, std::int64_t batches) {
  std::vector<std::int64_t> drawn;
  for (std::int64_t b = 0; b < batches; ++b) {
    const ReplaySample s = rb.sample(batch);
    const std::vector<std::int64_t> steps = checked_steps(s.batch);
    REQUIRE(std::vector<std::int64_t>(s.indices.begin(), s.indices.end()) == steps);
    drawn.insert(drawn.end(), steps.begin(), steps.end());
  }
  return drawn;
}

}  // namespace

TEST_CASE("without replacement covers every row once per pass when the batch does not divide the rows "
          "(drop_last=False)", "[replay][samplers]") {
  constexpr std::int64_t kRows = 1000;
  constexpr std::int64_t kPasses = 10;
  ScratchDir dir;
  { ReplayBuffer::create(dir.path(), {.capacity = kRows}).extend(make_rows(0, kRows)); }
  for (const std::int64_t batch : {std::int64_t{64}, std::int64_t{256}}) {
    INFO("sample(" << batch << ")");
    ReplayBuffer rb = ReplayBuffer::open(dir.path(), {.sampler = SamplerKind::WithoutReplacement,
                                                      .seed = static_cast<std::uint64_t>(batch)});
    const std::vector<std::int64_t> drawn = draw_steps(rb, batch, (kPasses * kRows + batch - 1) / batch);
    REQUIRE(static_cast<std::int64_t>(drawn.size()) >= kPasses * kRows);
    // No row twice among the first kRows draws, and each pass is a permutation of all rows.
    for (std::int64_t pass = 0; pass < kPasses; ++pass) {
      INFO("pass " << pass);
      const std::set<std::int64_t> rows(drawn.begin() + pass * kRows, drawn.begin() + (pass + 1) * kRows);
      REQUIRE(static_cast<std::int64_t>(rows.size()) == kRows);
      REQUIRE((*rows.begin() == 0 && *rows.rbegin() == kRows - 1));
    }
    // After every draw, no row was drawn more than once more often than any other.
    std::vector<std::int64_t> counts(kRows);
    std::int64_t at_least = 0;  // every row was drawn at least this often
    std::int64_t ahead = 0;     // rows drawn at_least + 1 times
    std::int64_t uneven = 0;
    for (const std::int64_t step : drawn) {
      if (++counts[static_cast<std::size_t>(step)] > at_least + 1) ++uneven;
      if (++ahead == kRows) {
        ++at_least;
        ahead = 0;
      }
    }
    REQUIRE(uneven == 0);
  }
}

TEST_CASE("fifo hands out rows oldest first, each once across handles, and skips overwritten ones",
          "[replay][samplers]") {
  using namespace std::chrono_literals;
  ScratchDir dir;
  ReplayBuffer a = ReplayBuffer::create(dir.path(), {.capacity = 8}, {.sampler = SamplerKind::Fifo, .timeout = 50ms});
  ReplayBuffer b = ReplayBuffer::open(dir.path(), {.sampler = SamplerKind::Fifo, .timeout = 50ms});
  a.extend(make_rows(0, 6));
  const auto steps = [](const ReplaySample& s) {
    std::vector<std::int64_t> out;
    for (std::int64_t i = 0; i < s.batch.batch_size()[0]; ++i) out.push_back(checked_step(s.batch, i));
    return out;
  };
  REQUIRE(steps(a.sample(2)) == std::vector<std::int64_t>{0, 1});
  REQUIRE(steps(b.sample(3)) == std::vector<std::int64_t>{2, 3, 4});
  REQUIRE_THROWS_WITH(a.sample(2), Catch::Contains("Fifo queue did not hold 2 rows"));
  REQUIRE(steps(a.sample(1)) == std::vector<std::int64_t>{5});
  a.extend(make_rows(6, 14));  // steps 6..19; only 12..19 are still in the ring
  REQUIRE(steps(b.sample(4)) == std::vector<std::int64_t>{12, 13, 14, 15});
  const ReplaySample last = a.sample(4);
  REQUIRE(steps(last) == std::vector<std::int64_t>{16, 17, 18, 19});
  REQUIRE(last.indices == std::vector<std::int64_t>{0, 1, 2, 3});
}
