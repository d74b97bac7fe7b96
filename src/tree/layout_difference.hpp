// Names the first difference between two layouts, for the SchemaMismatch of a receive, a
// collective or a publish whose tree is not of the layout on the other side.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tensortree/schema.hpp"

namespace tensortree::detail {

// The first key whose presence, dtype, shape or (for a node) batch size differs: `here`'s leaves in
// layout order, then `there`'s, then the nodes. Nothing when only the fingerprints differ.
struct LayoutDifference {
  std::string key;    // "obs.pixels"; empty for the root node
  std::string here;   // "float32 [4, 64, 64]", "batch_size [4]" or "no such key"
  std::string there;
};
std::optional<LayoutDifference> first_difference(const Schema& here, const Schema& there);

// "at key 'obs.pixels': float32 [4, 84, 84] <there_name>, float32 [4, 64, 64] here" (there_name:
// "there", "in the publication"), or "" when no key differs.
std::string difference_text(const Schema& here, const Schema& there, std::string_view there_name);

}  // namespace tensortree::detail
