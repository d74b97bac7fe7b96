#include "rl/weights/lease_table.hpp"

#include "core/text_format.hpp"

namespace tensortree::rl {

std::uint32_t LeaseTable::try_take(std::uint64_t lease, std::uint32_t start) const {
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint32_t index = (start + i) % count_;
    std::atomic<std::uint64_t>& word = words_[index].value;
    std::uint64_t expected = 0;
    // seq_cst: the publisher's claim of the slot and this store are ordered one way or the other,
    // and the reader checks the claim after it (see WeightSubscriber::latest).
    if (word.load(std::memory_order_relaxed) == 0 && word.compare_exchange_strong(expected, lease)) return index;
  }
  return count_;
}

std::atomic<std::uint64_t>* LeaseTable::take(std::uint32_t slot, const ProcessIdentity& holder,
                                             std::uint32_t& hint) const {
  const std::uint64_t lease = encode_lease(holder, slot);
  std::uint32_t index = try_take(lease, hint % count_);
  if (index == count_ && free_dead() > 0) index = try_take(lease, hint % count_);
  if (index == count_) return nullptr;
  hint = index + 1;
  return &words_[index].value;
}

bool LeaseTable::free_if_dead(std::atomic<std::uint64_t>& word, std::uint64_t seen) {
  if (process_alive(lease_holder(seen))) return false;
  return word.compare_exchange_strong(seen, 0);
}

std::uint32_t LeaseTable::free_dead() const {
  std::uint32_t freed = 0;
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint64_t seen = words_[i].value.load();
    if (seen != 0 && free_if_dead(words_[i].value, seen)) ++freed;
  }
  return freed;
}

bool LeaseTable::pinned_by_live_reader(std::uint32_t slot) const {
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint64_t seen = words_[i].value.load();
    if (seen == 0 || lease_slot(seen) != slot) continue;
    if (!free_if_dead(words_[i].value, seen)) return true;
  }
  return false;
}

std::string LeaseTable::describe_holders() const {
  std::string out;
  for (std::uint32_t i = 0; i < count_; ++i) {
    const std::uint64_t seen = words_[i].value.load();
    if (seen == 0) continue;
    out += fmt::format("{}pid {} holds slot {}", out.empty() ? "" : ", ", lease_holder(seen).pid, lease_slot(seen));
  }
  return out.empty() ? "no lease is held" : out;
}

}  // namespace tensortree::rl
