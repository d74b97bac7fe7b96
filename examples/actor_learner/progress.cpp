#include "progress.hpp"

#include <cinttypes>

#include "output.hpp"

namespace actor_learner {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Progress::Progress(const Options& o, const Protocol& protocol)
    : o_(o), protocol_(protocol), per_actor_(static_cast<std::size_t>(protocol.actors) + 1, 0) {}

void Progress::headline(const std::string& device, const std::string& backend) const {
  say(format("[learner] %d actor(s), trajectories [T %" PRId64 ", B %" PRId64 "] with obs 3x%" PRId64 "x%" PRId64
             ", %d batches of %d, broadcast every %d, device %s, backend %s",
             protocol_.actors, o_.T, o_.B, o_.height, o_.width, o_.batches, o_.batch, o_.broadcast_every,
             device.c_str(), backend.c_str()));
}

void Progress::measure(const tensortree::TensorTree& tree) {
  trajectory_bytes_ = 0;
  tree.for_each_leaf(
      [&](const tensortree::Path&, const tensortree::Tensor& leaf) { trajectory_bytes_ += leaf.nbytes(); });
}

void Progress::start() { start_ = interval_start_ = std::chrono::steady_clock::now(); }

void Progress::batch_learned(const BatchStats& stats) {
  last_ = stats;
  ++batches_;
  if (batches_ % o_.report_every != 0 && batches_ != o_.batches) return;
  const double seconds = seconds_since(interval_start_);
  const double batches = static_cast<double>(batches_ - interval_batches_);
  const double bytes = batches * o_.batch * static_cast<double>(trajectory_bytes_);
  say(format("[learner] batches %d/%d  %.1f batches/s  %.1f MB/s  per-actor %s  mean reward %.4f  done %.4f  "
             "obs xxh3 %016" PRIx64,
             batches_, o_.batches, batches / seconds, bytes / seconds / 1e6, per_actor_text().c_str(),
             last_.mean_reward, last_.done_fraction, last_.obs_hash));
  interval_start_ = std::chrono::steady_clock::now();
  interval_batches_ = batches_;
}

void Progress::summary(const Verdicts& verdicts) const {
  const double seconds = seconds_since(start_);
  const double trajectories = static_cast<double>(batches_) * o_.batch;
  const double megabytes = trajectories * static_cast<double>(trajectory_bytes_) / 1e6;
  say(format("[learner] done: %d batches of %d trajectories (%.2f MB each) in %.2f s, %.1f batches/s, "
             "%.1f MB received, %.1f MB/s; per-actor %s; %d parameter broadcasts after version 0; "
             "%" PRId64 "/%" PRId64 " checks passed",
             batches_, o_.batch, static_cast<double>(trajectory_bytes_) / 1e6, seconds,
             static_cast<double>(batches_) / seconds, megabytes, megabytes / seconds, per_actor_text().c_str(),
             broadcasts_, verdicts.passed(), verdicts.checks()));
}

std::string Progress::per_actor_text() const {
  std::string text;
  for (std::size_t a = 1; a < per_actor_.size(); ++a) {
    if (a > 1) text += '/';
    text += std::to_string(per_actor_[a]);
  }
  return text;
}

}  // namespace actor_learner
