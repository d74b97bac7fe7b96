// Test hooks: points inside extend() where a test stops a writer to kill it there. Unset (null)
// outside tests; a plain function pointer per point, read once per extend.
#pragma once

#include <cstdint>

namespace tensortree::detail {

struct ReplayHooks {
  // After the rows of one extend are claimed (their sequence numbers odd), before any byte is written.
  void (*after_claim)(std::int64_t first_row, std::int64_t rows) = nullptr;
};

ReplayHooks& replay_hooks();

}  // namespace tensortree::detail
