// What a ReplayBuffer handle holds: the mapped control block, the rows once they exist, and this
// handle's writer, gather and sampler tables (kept between calls so the hot paths allocate nothing).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "rl/replay/control_block.hpp"
#include "rl/replay/row_gather.hpp"
#include "rl/replay/row_store.hpp"
#include "rl/replay/row_writer.hpp"
#include "rl/replay/sampler.hpp"
#include "tensortree/replay_buffer.hpp"

namespace tensortree {

struct ReplayBuffer::State {
  State(std::filesystem::path dir, const ReplayOpenOptions& options, detail::ControlBlock control);

  // Maps the rows when another process has laid them out since; false while there are none.
  bool find_rows();

  std::filesystem::path dir;
  ReplayOpenOptions options;
  detail::ControlBlock control;
  std::optional<detail::RowStore> store;
  std::unique_ptr<detail::Sampler> sampler;
  detail::RowWriter writer;
  detail::RowGather gather;
  std::mt19937_64 rng;
  std::vector<detail::SampleUnit> units;
  StoragePtr staging;   // pinned host memory for samples bound to a GPU
  StoragePtr recycled;  // the last host batch's buffer, gathered into again once nobody holds it
};

}  // namespace tensortree
