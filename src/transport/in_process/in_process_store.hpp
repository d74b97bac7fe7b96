// InProcessStore: what the members of one in-process group share (gloo's HashStore, for threads):
// the bootstrap's rounds and every member's mailbox. A round is matched by order, as the Bootstrap
// contract says: each member's k-th call meets the others' k-th call. Each member deposits its
// bytes, waits (bounded) until every member has, and reads all of them; the last to leave frees
// the round. A sub-group made by split gets a store of its own, so its traffic never meets its
// parent's (MPI's communicators).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/in_process/mailbox.hpp"

namespace tensortree::detail {

class InProcessStore {
 public:
  InProcessStore(int size, std::chrono::milliseconds timeout);
  InProcessStore(const InProcessStore&) = delete;
  InProcessStore& operator=(const InProcessStore&) = delete;

  int size() const { return static_cast<int>(mailboxes_.size()); }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Where the messages to member `rank` wait for it.
  Mailbox& mailbox(int rank) { return *mailboxes_.at(static_cast<std::size_t>(rank)); }

  // Round `round` of member `rank`: deposits `mine`, then returns every member's deposit in rank
  // order. Timeout naming the round, `operation` and the members that did not arrive within the
  // store's timeout; InvalidArgument when members call different operations in one round;
  // BackendError once the store is aborted.
  std::vector<std::vector<std::byte>> exchange(int rank, std::uint64_t round, const char* operation,
                                               std::span<const std::byte> mine);
  // The store of the sub-group `color` made in split round `round`, of `members` members: the same
  // object for every member that asks, created by the first (aborted already where this one is).
  std::shared_ptr<InProcessStore> child(std::uint64_t round, int color, int members);

  // Wakes every wait on the store's rounds (and its children's) with BackendError naming `reason`:
  // a member that failed will not arrive. Mailboxes are the backends' to abort.
  void abort(const std::string& reason);

 private:
  struct Round {
    std::string operation;
    std::vector<std::optional<std::vector<std::byte>>> deposits;
    int arrived = 0;
    int left = 0;
    // Set by a member that called another operation in this round: every member of the round
    // fails with it, not only that one (the others would wait out their timeout otherwise).
    std::string conflict;
  };
  // A sub-group's store until each of its members has taken it.
  struct Child {
    std::shared_ptr<InProcessStore> store;
    int taken = 0;
  };

  Round& round_locked(std::uint64_t round, const char* operation, int rank);
  std::string missing_locked(const Round& round) const;

  std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, Round> rounds_;
  std::optional<std::string> aborted_;
  std::map<std::pair<std::uint64_t, int>, Child> pending_children_;
  std::vector<std::weak_ptr<InProcessStore>> children_;
};

}  // namespace tensortree::detail
