// What every actor does with the weights it holds, local (actor.cpp) or remote (remote_actor.cpp):
// checks each element of them, then fills a trajectory acted with them.
#pragma once

#include <cstdint>

#include "job.hpp"
#include "tensortree/tree.hpp"

namespace shared_job {

// CorruptData naming the actor and the version when an element of `params` differs from what
// `version` must hold.
void check_weights(const Options& o, const tensortree::TensorTree& params, std::int64_t version);

// Fills `trajectory` for this actor's trajectory `trajectory_id`, acted with `params` of
// `version`; under --corrupt the corrupting actor then damages one element.
void act(const Options& o, tensortree::TensorTree& trajectory, std::int64_t trajectory_id,
         const tensortree::TensorTree& params, std::int64_t version);

}  // namespace shared_job
