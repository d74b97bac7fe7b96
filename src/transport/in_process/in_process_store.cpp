#include "transport/in_process/in_process_store.hpp"

#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

InProcessStore::InProcessStore(int size, std::chrono::milliseconds timeout) : timeout_(timeout) {
  if (size <= 0) throw InvalidArgument(fmt::format("an in-process group needs at least one member, got {}", size));
  for (int rank = 0; rank < size; ++rank) mailboxes_.push_back(std::make_unique<Mailbox>(rank));
}

InProcessStore::Round& InProcessStore::round_locked(std::uint64_t round, const char* operation, int rank) {
  Round& found = rounds_[round];
  if (found.deposits.empty()) {
    found.operation = operation;
    found.deposits.resize(static_cast<std::size_t>(size()));
  }
  if (found.operation != operation && found.conflict.empty()) {
    found.conflict = fmt::format("in-process bootstrap round {}: rank {} calls {} where another member called {} "
                                 "(every member must make the same calls in the same order)", round, rank, operation,
                                 found.operation);
    changed_.notify_all();
  }
  if (!found.conflict.empty()) throw InvalidArgument(found.conflict);
  return found;
}

std::string InProcessStore::missing_locked(const Round& round) const {
  std::vector<std::size_t> ranks;
  for (std::size_t r = 0; r < round.deposits.size(); ++r) {
    if (!round.deposits[r]) ranks.push_back(r);
  }
  return fmt::format("{}", ranks);
}

std::vector<std::vector<std::byte>> InProcessStore::exchange(int rank, std::uint64_t round, const char* operation,
                                                             std::span<const std::byte> mine) {
  std::unique_lock lock(mutex_);
  const auto refuse_if_aborted = [&] {
    if (aborted_) {
      throw BackendError(fmt::format("rank {}: the in-process bootstrap's {} (round {}) was aborted: {}", rank,
                                     operation, round, *aborted_));
    }
  };
  refuse_if_aborted();
  Round& current = round_locked(round, operation, rank);
  current.deposits[static_cast<std::size_t>(rank)].emplace(mine.begin(), mine.end());
  current.arrived += 1;
  changed_.notify_all();
  const auto complete = [&] { return current.arrived == size() || aborted_.has_value() || !current.conflict.empty(); };
  const std::optional<WaitClock::time_point> deadline = deadline_after(timeout_);
  const bool done = deadline ? changed_.wait_until(lock, *deadline, complete) : (changed_.wait(lock, complete), true);
  refuse_if_aborted();
  if (!current.conflict.empty()) throw InvalidArgument(current.conflict);
  if (!done) {
    // The round stays: a late member still finds this member's deposit, and a retry is not made.
    throw Timeout(fmt::format("rank {}: the in-process bootstrap's {} (round {}) did not complete within the group's "
                              "timeout of {} ms (GroupOptions::timeout); ranks {} did not arrive", rank, operation,
                              round, timeout_.count(), missing_locked(current)));
  }
  std::vector<std::vector<std::byte>> all;
  for (const auto& deposit : current.deposits) all.push_back(*deposit);
  if (++current.left == size()) rounds_.erase(round);
  return all;
}

std::shared_ptr<InProcessStore> InProcessStore::child(std::uint64_t round, int color, int members) {
  const std::lock_guard lock(mutex_);
  Child& made = pending_children_[{round, color}];
  if (!made.store) {
    made.store = std::make_shared<InProcessStore>(members, timeout_);
    // A split that completed just before the abort: its sub-group must not wait either.
    made.store->aborted_ = aborted_;
    std::erase_if(children_, [](const std::weak_ptr<InProcessStore>& child) { return child.expired(); });
    children_.push_back(made.store);
  }
  std::shared_ptr<InProcessStore> store = made.store;
  if (++made.taken == members) pending_children_.erase({round, color});
  return store;
}

void InProcessStore::abort(const std::string& reason) {
  std::vector<std::shared_ptr<InProcessStore>> children;
  {
    const std::lock_guard lock(mutex_);
    if (!aborted_) aborted_ = reason;
    for (const auto& weak : children_) {
      if (auto child = weak.lock()) children.push_back(std::move(child));
    }
  }
  changed_.notify_all();
  for (const auto& child : children) child->abort(reason);
}

}  // namespace tensortree::detail
