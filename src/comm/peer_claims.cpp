#include "comm/peer_claims.hpp"

#include <string>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/peer_transport.hpp"
#include "tensortree/error.hpp"
#include "tensortree/group.hpp"

namespace tensortree::detail {

namespace {

std::string peer_name(int peer) { return peer == kAnySource ? "an unknown rank" : fmt::format("rank {}", peer); }

}  // namespace

void check_peer_claim(const Group& group, int peer, std::uint64_t claimed_bytes, std::string_view what) {
  const std::uint64_t limit = group.options().max_message_bytes;
  if (claimed_bytes <= limit) return;
  throw CorruptData(fmt::format("{}: {} claimed {} bytes, more than this rank's limit of {} bytes "
                                "(GroupOptions::max_message_bytes, TENSORTREE_MAX_MESSAGE_BYTES); nothing was "
                                "allocated", what, peer_name(peer), claimed_bytes, limit));
}

std::uint64_t peer_claim_sum(int peer, std::initializer_list<std::uint64_t> parts, std::string_view what) {
  std::uint64_t total = 0;
  for (const std::uint64_t part : parts) {
    const std::optional<std::uint64_t> sum = checked_add(total, part);
    if (!sum) {
      throw CorruptData(fmt::format("{}: {} claimed sizes whose sum overflows 64 bits ({} bytes); nothing was "
                                    "allocated", what, peer_name(peer), fmt::join(parts, " + ")));
    }
    total = *sum;
  }
  return total;
}

std::uint64_t checked_peer_claim(const Group& group, int peer, std::initializer_list<std::uint64_t> parts,
                                 std::string_view what) {
  const std::uint64_t total = peer_claim_sum(peer, parts, what);
  check_peer_claim(group, peer, total, what);
  return total;
}

}  // namespace tensortree::detail
