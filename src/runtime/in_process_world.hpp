// The ranks of a group as threads of this process, over an in-process bootstrap and the default
// transport factory: each thread gets its rank's Group, and the transport choice works as between
// processes (shared memory between members that can map each other's memory, which threads of
// one process can; the in-process backend where MPI would serve). For single-process tests of
// Group, the transports and tree_comm; internal (src/), as DistributedContext is the users' way.
#pragma once

#include <functional>

#include "tensortree/group.hpp"

namespace tensortree::detail {

// Runs `body(group)` on `size` threads, one per rank of a new in-process world made with
// `options`, and returns once every thread has ended. When a rank throws, the world is aborted,
// with every group split from it (DeviceMesh dimensions, splits of splits; one made afterwards is
// aborted as it is made): the others' waits end at once with BackendError instead of running out
// their timeout. The first exception thrown is rethrown here.
void run_in_process(int size, const GroupOptions& options, const std::function<void(const Group&)>& body);

}  // namespace tensortree::detail
