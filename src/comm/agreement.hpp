// One agreement round: "do all members hold the same value?", over a group's bootstrap. Collective
// calls whose arguments must match across ranks (new_group's ranks, mesh dimensions, the layout of
// a reduced tree) check it once here, so that a mismatch is a typed error on every rank instead of
// communicators built from different arguments or buffers reduced into garbage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "comm/bootstrap.hpp"

namespace tensortree {
class Group;
}  // namespace tensortree

namespace tensortree::detail {

// FNV-1a over the values a collective call's ranks must agree on.
class Fingerprint {
 public:
  Fingerprint& add(std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) hash_ = (hash_ ^ ((value >> (8 * byte)) & 0xffu)) * 0x100000001b3ull;
    return *this;
  }
  Fingerprint& add(std::string_view text) {
    add(text.size());
    for (const char c : text) add(static_cast<unsigned char>(c));
    return *this;
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

// Collective: null when every member passed the same `value`; otherwise, on every rank, a sentence
// that names `what`, this rank's value and the ranks that hold another one.
std::optional<std::string> disagreement(Bootstrap& bootstrap, std::uint64_t value, std::string_view what);
std::optional<std::string> disagreement(const Group& group, std::uint64_t value, std::string_view what);

// As disagreement, throwing InvalidArgument on every rank when the members differ.
void require_agreement(Bootstrap& bootstrap, std::uint64_t value, std::string_view what);
void require_agreement(const Group& group, std::uint64_t value, std::string_view what);

}  // namespace tensortree::detail
