// Debug mode for collectives (GroupOptions::debug_checks, or TENSORTREE_DISTRIBUTED_DEBUG=DETAIL as
// PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL): before each collective every rank shares what it is about to
// call (operation, root, reduction, dtype, shape) and its own verdict on its arguments, in one small
// all-gather on the CPU collectives. Every rank then reads the same table and throws the same
// InvalidArgument naming the ranks that differ, or the ranks that rejected their own arguments.
// So a mismatch that MPI cannot see (equal byte counts, a different root, broadcast against
// all_reduce) is an error instead of wrong values, and a rank that fails its own checks does not
// leave the others waiting in a collective it never enters. Off, the check costs one getenv.
#pragma once

#include <exception>
#include <optional>
#include <string_view>

#include "tensortree/error.hpp"
#include "tensortree/group.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::dist::detail {

// What one rank is about to call.
struct CollectiveCall {
  std::string_view op = {};
  int root = -1;  // -1: the operation has none
  std::optional<ReduceOp> reduction = std::nullopt;
  // Every rank's tensor has this dtype and, with same_shape, this shape (null: nothing to compare).
  const Tensor* tensor = nullptr;
  bool same_shape = true;
};

// True when TENSORTREE_DISTRIBUTED_DEBUG is DETAIL; OFF, INFO or unset is false. Any other value is
// InvalidArgument: a misspelt setting must not silently turn the checks off.
bool debug_setting_from_environment();

// The group's GroupOptions::debug_checks where its maker set it, the environment's setting
// otherwise (read at each call, so a program may turn it on for a stretch of calls).
bool debug_mode_enabled(const Group& group);

// Shares `call` and this rank's verdict (`local_error`: null when its arguments passed) with the
// group; throws on every rank when any rank rejected its arguments or the calls differ.
void agree_on_collective(const CollectiveCall& call, const Group& group, std::exception_ptr local_error);

// Runs the rank's own argument checks (which throw InvalidArgument); in debug mode agrees with the
// group before the collective is entered. The caller has checked membership first: only members
// take part in the round.
template <class LocalChecks>
void check_collective(const CollectiveCall& call, const Group& group, LocalChecks&& local_checks) {
  if (!debug_mode_enabled(group)) {
    local_checks();
    return;
  }
  std::exception_ptr local_error;
  try {
    local_checks();
  } catch (const InvalidArgument&) {
    local_error = std::current_exception();
  }
  agree_on_collective(call, group, local_error);
}

}  // namespace tensortree::dist::detail
