// Sizes a peer's bytes claim, checked before anything is allocated for them: overflow-checked
// sums, and the group's GroupOptions::max_message_bytes for a message whose size the receiver
// did not know. Every failure is CorruptData naming the operation, the peer, the bytes claimed
// and the limit.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace tensortree {
class Group;
}  // namespace tensortree

namespace tensortree::detail {

// CorruptData unless `claimed_bytes` is at most group.options().max_message_bytes. `what` says
// what the peer claimed ("broadcast: the root's announced payload"); `peer` is a group rank, or
// kAnySource for a sender not yet known.
void check_peer_claim(const Group& group, int peer, std::uint64_t claimed_bytes, std::string_view what);

// The sum of `parts` (sizes a peer claimed), CorruptData naming `peer` and the parts when it
// overflows 64 bits.
std::uint64_t peer_claim_sum(int peer, std::initializer_list<std::uint64_t> parts, std::string_view what);

// Both: the sum of `parts`, checked against the group's limit.
std::uint64_t checked_peer_claim(const Group& group, int peer, std::initializer_list<std::uint64_t> parts,
                                 std::string_view what);

}  // namespace tensortree::detail
