// Names the first difference between two layouts, for the SchemaMismatch of a publish whose tree
// does not fit its publication.
#pragma once

#include <string>

#include "tensortree/schema.hpp"

namespace tensortree::rl {

// "leaf 'policy.w' is float32 [4, 8] here, float32 [4, 9] in the publication", or a node's batch
// size or a missing leaf; empty when the layouts agree.
std::string layout_difference(const Schema& offered, const Schema& published);

}  // namespace tensortree::rl
