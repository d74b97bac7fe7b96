// The lease words of a weight publication: a reader takes a free word to pin the slot it reads,
// and the publisher, before writing a slot, asks whether a live process pins it. A word whose
// process is gone (killed while holding a version) is freed by whoever finds it, so a dead reader
// never blocks the publisher.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "rl/process_identity.hpp"
#include "rl/weights/control_block.hpp"

namespace tensortree::rl {

class LeaseTable {
 public:
  LeaseTable(PaddedWord* words, std::uint32_t count) : words_(words), count_(count) {}

  // Reader: pins `slot` for `holder` in a free word (searched from `hint`, which moves on), or
  // returns nullptr when every word is held by a live process.
  std::atomic<std::uint64_t>* take(std::uint32_t slot, const ProcessIdentity& holder, std::uint32_t& hint) const;
  // Publisher: whether a live process pins `slot`; the words of dead ones on it are freed.
  bool pinned_by_live_reader(std::uint32_t slot) const;
  // "pid 12 holds slot 1, ..." for a Timeout's message.
  std::string describe_holders() const;

 private:
  // The index of the word taken, or count_ when none was free.
  std::uint32_t try_take(std::uint64_t lease, std::uint32_t start) const;
  // Frees `word` if it still holds `seen` and the process named there is gone; true if it did.
  static bool free_if_dead(std::atomic<std::uint64_t>& word, std::uint64_t seen);
  std::uint32_t free_dead() const;

  PaddedWord* words_;
  std::uint32_t count_;
};

}  // namespace tensortree::rl
