#include "transport/in_process/in_process_work.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"

namespace tensortree::detail {

void InProcessWait::throw_if_aborted() const {
  if (aborted) aborted->throw_if_raised([&] { return fmt::format("rank {}: {}", rank, operation); });
}

Timeout InProcessWait::timed_out() const {
  const std::string with_peer = peer >= 0 ? fmt::format(" with rank {}", peer) : std::string();
  return Timeout(fmt::format("rank {}: {}{} did not complete within the group's timeout of {} ms "
                             "(GroupOptions::timeout); it is still posted: wait again, or end the group with "
                             "Group::abort", rank, operation, with_peer, timeout.count()));
}

void InProcessWait::wait(const std::function<bool()>& ready) const {
  const bool done = mailbox().wait_until([&] { return ready() || (aborted && aborted->raised()); },
                                         deadline_after(timeout));
  throw_if_aborted();
  if (!done) throw timed_out();
}

// One deadline for the whole wait, however many unrelated messages wake it meanwhile.
void InProcessWait::wait_for_message(const std::function<bool()>& attempt) const {
  Mailbox& box = mailbox();
  const auto deadline = deadline_after(timeout);
  for (;;) {
    const std::uint64_t seen = box.arrivals();
    if (attempt()) return;
    const bool moved = box.wait_until([&] { return box.arrivals() != seen || (aborted && aborted->raised()); },
                                      deadline);
    throw_if_aborted();
    if (!moved) throw timed_out();
  }
}

PostedWork::~PostedWork() {
  for (const auto& receive : receives_) wait_.mailbox().cancel(receive);
}

bool PostedWork::settled_locked() const {
  return std::all_of(receives_.begin(), receives_.end(), [](const auto& receive) { return receive->settled; });
}

bool PostedWork::test() {
  wait_.throw_if_aborted();
  return wait_.mailbox().holds([this] { return settled_locked(); });
}

void PostedWork::block() {
  wait_.wait([this] { return settled_locked(); });
}

// The first receive of the wrong length, in posting order, is the error (as MPI's statuses say).
void PostedWork::finish() {
  for (const auto& receive : receives_) {
    if (receive->error) std::rethrow_exception(receive->error);
  }
}

int PostedWork::source_rank() const {
  if (receives_.size() != 1 || receives_.front()->key.source != kAnySource) return Work::source_rank();
  // Read under the mailbox's lock: the sender's thread settles the receive under it.
  int source = -1;
  wait_.mailbox().holds([&] {
    source = receives_.front()->source;
    return true;
  });
  return source >= 0 ? source : Work::source_rank();
}

std::optional<TakenMessage> take_bounded(const InProcessWait& wait, const MessageKey& key,
                                         std::uint64_t max_message_bytes) {
  return wait.mailbox().take(key, [&](int source, std::uint64_t bytes) {
    if (bytes <= max_message_bytes) return;
    throw CorruptData(fmt::format("{}: rank {} sent a message of {} bytes (tag {}), more than rank {}'s limit of {} "
                                  "bytes (GroupOptions::max_message_bytes); nothing was allocated and the message was "
                                  "left unreceived", wait.operation, source, bytes, key.tag, wait.rank,
                                  max_message_bytes));
  });
}

TakenMessage take_bounded_waiting(const InProcessWait& wait, const MessageKey& key, std::uint64_t max_message_bytes) {
  std::optional<TakenMessage> taken;
  wait.wait_for_message([&] { return (taken = take_bounded(wait, key, max_message_bytes)).has_value(); });
  return std::move(*taken);
}

int MatchedWork::source_rank() const {
  if (source_ < 0) throw NotSupported("source_rank is known only once the message has been matched");
  return source_;
}

// The message is taken before `choose` is asked: one it refuses is consumed all the same (as the
// MPI backend receives it into scratch), so that it cannot block the sender's next one.
bool MatchedWork::test() {
  wait_.throw_if_aborted();
  std::optional<TakenMessage> taken = take_bounded(wait_, key_, max_message_bytes_);
  if (!taken) return false;
  source_ = taken->source;
  const std::size_t nbytes = taken->bytes->size();
  const Tensor destination = choose_(source_, nbytes);
  if (!destination.defined() || destination.nbytes() != nbytes || !destination.device().is_cpu()) {
    throw InvalidArgument(fmt::format("recv_matched: the chosen destination does not hold the {} bytes rank {} sent",
                                      nbytes, source_));
  }
  if (nbytes > 0) std::memcpy(destination.data_ptr(), taken->bytes->data(), nbytes);
  return true;
}

void MatchedWork::block() {
  wait_.wait_for_message([this] { return test(); });
}

}  // namespace tensortree::detail
