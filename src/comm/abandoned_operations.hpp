// Abandoned operations: what a Work dropped while its transfer is still in flight leaves behind
// when waiting for it could take forever (a peer that died, a collective that timed out). The
// transfer may still write its buffers, so they are kept, together with whatever can tell when it
// has finished, instead of being freed or waited for. Each new abandonment first releases those
// that have finished since; the others are never freed (a bounded leak, not a hang or a write into
// freed memory).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "tensortree/work.hpp"

namespace tensortree::detail {

// `finished` owns the operation's buffers and handles; it returns true once the transfer is over
// (then it is destroyed, releasing them) and must not throw. It runs on whichever thread abandons
// an operation next, under the registry's lock, so it must not abandon anything itself.
void abandon_operation(std::function<bool()> finished);

// Keeps `work` (a message nobody waits for, such as a closing sent at teardown) in flight until it
// completes, unless it already has; a failure counts as finished.
void abandon_unless_completed(WorkPtr work);

// Polls the abandoned operations until every one has finished (true) or `limit` has passed
// (false). MPI must not be finalised under a transfer still in flight: a request left pending
// keeps its communicator, and whatever the transfer reads or writes, alive for good.
bool settle_abandoned_operations(std::chrono::milliseconds limit);

// How many abandoned operations are still in flight, after releasing those that have finished
// (for tests and diagnostics).
std::size_t abandoned_operations_held();

}  // namespace tensortree::detail
