#include "comm/agreement.hpp"

#include <array>
#include <cstring>
#include <vector>

#include "comm/group_state.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

// Every value is gathered (8 bytes per rank, once per collective call that needs it) rather than
// reduced to a min and max, so that the error can say which ranks differ.
std::optional<std::string> disagreement(Bootstrap& bootstrap, std::uint64_t value, std::string_view what) {
  std::array<std::byte, sizeof value> mine{};
  std::memcpy(mine.data(), &value, sizeof value);
  const std::vector<std::byte> all = bootstrap.all_gather(mine);
  std::vector<int> differing;
  for (int r = 0; r < bootstrap.size(); ++r) {
    std::uint64_t theirs = 0;
    std::memcpy(&theirs, all.data() + static_cast<std::size_t>(r) * sizeof value, sizeof value);
    if (theirs != value) differing.push_back(r);
  }
  if (differing.empty()) return std::nullopt;
  return fmt::format("the ranks passed different {} (rank {} of {} passed fingerprint {}; ranks {} passed another)",
                     what, bootstrap.rank(), bootstrap.size(), value, differing);
}

std::optional<std::string> disagreement(const Group& group, std::uint64_t value, std::string_view what) {
  return disagreement(GroupAccess::require(group).bootstrap(), value, what);
}

void require_agreement(Bootstrap& bootstrap, std::uint64_t value, std::string_view what) {
  if (auto differs = disagreement(bootstrap, value, what)) {
    throw InvalidArgument(fmt::format("{} to a collective call that needs the same on every rank", *differs));
  }
}

void require_agreement(const Group& group, std::uint64_t value, std::string_view what) {
  require_agreement(GroupAccess::require(group).bootstrap(), value, what);
}

}  // namespace tensortree::detail
