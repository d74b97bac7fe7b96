// The learner: creates the replay buffer and the weight publication, samples batches and checks
// every element of each, publishes a new version every `publish_every` samples, and reports the
// throughput and the policy lag it saw. With remote actors it also takes their channels
// (channel_intake.hpp) every turn of its loop, into the same buffer.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <optional>

#include "channel_intake.hpp"
#include "job.hpp"
#include "tensortree/policy_version.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/weights.hpp"
#include "values.hpp"

using namespace tensortree;

namespace shared_job {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// What the learner counts over the run.
struct Totals {
  std::int64_t samples = 0;
  std::int64_t rows = 0;
  std::int64_t remote_rows = 0;  // of `rows`, those a remote actor sent over a channel
  double bytes = 0;
  std::int64_t wrong = 0;
  std::int64_t dropped = 0;
  std::int64_t max_lag = 0;
  double lag_sum = 0;  // over every row looked at

  void add(const PolicyLag& lag) {
    dropped += lag.dropped;
    max_lag = std::max(max_lag, lag.max_lag);
    lag_sum += lag.mean_lag * static_cast<double>(lag.rows);
  }
  double mean_lag() const { return rows > 0 ? lag_sum / static_cast<double>(rows) : 0; }
};

void print_progress(double t, std::uint64_t version, std::uint64_t inserted, const Totals& totals) {
  std::printf("[learner] %5.1f s  version %4" PRIu64 "  inserted %9" PRIu64 "  sampled %9" PRId64
              "  lag mean %.2f max %" PRId64 "  wrong %" PRId64 "\n",
              t, version, inserted, totals.rows, totals.mean_lag(), totals.max_lag, totals.wrong);
  std::fflush(stdout);
}

void print_table(double t, std::uint64_t inserted, std::uint64_t version, const Totals& totals, std::int64_t max_lag) {
  const auto rate = [t](double x) { return t > 0 ? x / t : 0.0; };
  std::printf("\n  shared-memory job, %.1f s\n", t);
  std::printf("  %-26s %14.0f\n", "inserts/s (rows)", rate(static_cast<double>(inserted)));
  std::printf("  %-26s %14.0f\n", "samples/s (rows)", rate(static_cast<double>(totals.rows)));
  std::printf("  %-26s %14.1f\n", "MB/s sampled", rate(totals.bytes) / 1e6);
  std::printf("  %-26s %14" PRId64 "\n", "batches sampled", totals.samples);
  std::printf("  %-26s %14" PRIu64 "\n", "weight versions published", version);
  std::printf("  %-26s %8.2f / %3" PRId64 "\n", "policy lag (mean / max)", totals.mean_lag(), totals.max_lag);
  std::printf("  %-26s %14" PRId64 "  (lag > %" PRId64 ")\n", "stale rows dropped", totals.dropped, max_lag);
  std::printf("  %-26s %14" PRId64 "\n", "rows checked", totals.rows);
  std::printf("  %-26s %14" PRId64 "\n", "  from local actors", totals.rows - totals.remote_rows);
  std::printf("  %-26s %14" PRId64 "\n", "  from remote actors", totals.remote_rows);
  std::printf("  %-26s %14" PRId64 "\n", "wrong elements", totals.wrong);
  std::fflush(stdout);
}

}  // namespace

int run_learner(const Options& o) {
  // A resumed learner takes over what the killed one left: the rows in the buffer, and the
  // publication with its newest version (the actors keep their subscriptions).
  ReplayBuffer replay = o.resume ? ReplayBuffer::open(replay_path(o.name))
                                 : ReplayBuffer::create(replay_path(o.name), {.capacity = o.capacity});
  WeightPublisher publisher(policy_name(o.name), {.replace = !o.resume});
  if (o.resume) {
    std::printf("[learner] resumed: %" PRIu64 " rows inserted so far, weights at version %" PRIu64 "\n",
                replay.inserted(), publisher.version());
    std::fflush(stdout);
  }
  std::optional<ChannelIntake> intake;
  if (!o.listen.empty()) intake.emplace(o);
  const TensorTree params = make_params(o.params);
  const auto publish = [&](std::int64_t version) {
    fill_params(params, version);
    publisher.publish(params);
    if (intake) intake->publish(params, publisher.version());
  };
  publish(static_cast<std::int64_t>(publisher.version()) + 1);

  const ActorIds ids = actor_ids(o);
  RowRules rules{o.steps, ids.end, 1, o.params};
  Totals totals;
  StoragePtr reuse;
  const Clock::time_point start = Clock::now();
  double next_report = 1.0;
  for (double t = 0; t < o.seconds; t = seconds_since(start)) {
    rules.newest_version = static_cast<std::int64_t>(publisher.version());
    if (intake) totals.wrong += intake->poll(replay, rules);
    ReplaySample sample = replay.sample(o.batch, {.reuse = reuse});
    reuse = sample.batch.storage();
    totals.wrong += wrong_row_elements(sample.batch, rules);
    totals.remote_rows += rows_of_actors(sample.batch, ids.remote_begin, ids.end);
    totals.add(drop_stale_rows(sample.batch, rules.newest_version, o.max_lag).lag);
    totals.rows += o.batch;
    for (const auto& [path, leaf] : sample.batch.leaves()) totals.bytes += static_cast<double>(leaf.nbytes());
    if (++totals.samples % o.publish_every == 0) publish(rules.newest_version + 1);
    if (t >= next_report) {
      print_progress(t, publisher.version(), replay.inserted(), totals);
      next_report += 1.0;
    }
  }
  const double elapsed = seconds_since(start);
  print_table(elapsed, replay.inserted(), publisher.version(), totals, o.max_lag);
  const bool noticed = !intake || intake->report();
  if (totals.samples == 0) {
    std::fprintf(stderr, "[learner] sampled nothing\n");
    return 1;
  }
  return totals.wrong == 0 && noticed ? 0 : 1;
}

}  // namespace shared_job
