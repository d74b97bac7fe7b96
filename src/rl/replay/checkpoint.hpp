// checkpoint(): a copy of a live buffer, taken while writers keep writing. Every published row is
// copied under its seqlock (one rewritten during its copy is left out), the priorities of the rows
// kept are copied under the priority lock, the cursor and sample count are noted after the rows
// (so every ticket in the copy is below its cursor), and the copy is published with the memmap
// module's temporary-sibling-and-rename.
#pragma once

#include <chrono>
#include <filesystem>

#include "rl/replay/control_block.hpp"
#include "rl/replay/row_store.hpp"
#include "tensortree/replay_buffer.hpp"

namespace tensortree::detail {

CheckpointInfo write_checkpoint(const ControlBlock& control, const RowStore& store, const std::filesystem::path& target,
                                const CheckpointOptions& options, std::chrono::milliseconds timeout);

}  // namespace tensortree::detail
