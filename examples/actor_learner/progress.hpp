// The learner's lines: the headline, one line every --report-every batches (batches/s, MB/s,
// trajectories per actor, the last batch's statistics) and the summary.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checks.hpp"
#include "job.hpp"
#include "tensortree/tensortree.hpp"

namespace actor_learner {

class Progress {
 public:
  Progress(const Options& o, const Protocol& protocol);

  void headline(const std::string& device, const std::string& backend) const;
  // The bytes of one trajectory like `tree`, for the MB/s.
  void measure(const tensortree::TensorTree& tree);
  void start();
  void trajectory_from(int actor) { ++per_actor_[static_cast<std::size_t>(actor)]; }
  // Prints a line every --report-every batches and after the last.
  void batch_learned(const BatchStats& stats);
  int batches() const { return batches_; }
  void broadcast_sent() { ++broadcasts_; }
  void summary(const Verdicts& verdicts) const;

 private:
  std::string per_actor_text() const;

  const Options& o_;
  const Protocol& protocol_;
  std::vector<std::int64_t> per_actor_;  // indexed by rank; [0] unused
  std::size_t trajectory_bytes_ = 0;
  int batches_ = 0;
  int interval_batches_ = 0;
  int broadcasts_ = 0;
  BatchStats last_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point interval_start_;
};

}  // namespace actor_learner
