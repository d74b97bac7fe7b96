// The replay buffer in Python, in TorchRL's words: ReplayBuffer.create / open by name or path,
// with sampler=RandomSampler(), PrioritizedSampler(max_capacity, alpha, beta),
// SliceSampler(slice_len=, traj_key=), SamplerWithoutReplacement() or FifoSampler(), a RateLimiter
// (Reverb's), extend(tree or dict), sample(batch_size) returning the rows with "index" and, when
// prioritized, "_weight", update_priority, len(rb), write_count and checkpoint.
#pragma once

#include <pybind11/pybind11.h>

namespace tensortree::python {

void bind_replay(pybind11::module_& module);

}  // namespace tensortree::python
