#include "comm/peer_claims.hpp"

#include <string>

#include "core/checked_math.hpp"
#include "tensortree/peer_transport.hpp"
#include "tensortree/error.hpp"
#include "tensortree/group.hpp"

namespace tensortree::detail {

namespace {

std::string peer_name(int peer) { return peer == kAnySource ? "an unknown rank" : "rank " + std::to_string(peer); }

}  // namespace

void check_peer_claim(const Group& group, int peer, std::uint64_t claimed_bytes, std::string_view what) {
  const std::uint64_t limit = group.options().max_message_bytes;
  if (claimed_bytes <= limit) return;
  throw CorruptData(std::string(what) + ": " + peer_name(peer) + " claimed " + std::to_string(claimed_bytes) +
                    " bytes, more than this rank's limit of " + std::to_string(limit) +
                    " bytes (GroupOptions::max_message_bytes, TENSORTREE_MAX_MESSAGE_BYTES); nothing was allocated");
}

std::uint64_t peer_claim_sum(int peer, std::initializer_list<std::uint64_t> parts, std::string_view what) {
  std::uint64_t total = 0;
  for (const std::uint64_t part : parts) {
    const std::optional<std::uint64_t> sum = checked_add(total, part);
    if (!sum) {
      std::string message(what);
      message += ": " + peer_name(peer) + " claimed sizes whose sum overflows 64 bits (";
      bool first = true;
      for (const std::uint64_t each : parts) {
        message += (first ? "" : " + ") + std::to_string(each);
        first = false;
      }
      throw CorruptData(message + " bytes); nothing was allocated");
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
