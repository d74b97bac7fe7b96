// The Works of the in-process backend. Each waits on its member's mailbox (a condition variable,
// not a poll), bounded by the group's timeout and ended by the engine's abort.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/abort_signal.hpp"
#include "transport/in_process/in_process_store.hpp"
#include "tensortree/peer_transport.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

// Where an operation waits and what its errors name.
struct InProcessWait {
  std::shared_ptr<InProcessStore> store;  // kept alive: the mailbox is the store's
  int rank = -1;
  const char* operation = "operation";  // a string literal
  int peer = -1;                        // -1 for a collective or several peers
  std::chrono::milliseconds timeout{};
  std::shared_ptr<const AbortSignal> aborted;

  Mailbox& mailbox() const { return store->mailbox(rank); }
  // BackendError once the backend was aborted.
  void throw_if_aborted() const;
  // Until `ready()` (called under the mailbox's lock) holds: Timeout past the group's timeout,
  // BackendError once aborted.
  void wait(const std::function<bool()>& ready) const;
  // As wait, until a message arrives that `attempt()` (called without the lock) takes: true.
  void wait_for_message(const std::function<bool()>& attempt) const;
  Timeout timed_out() const;
};

// The receives of one batch posted into the mailbox; complete once every one matched a message.
// A receive still unmatched when the Work is dropped is cancelled, as MPI's are.
class PostedWork final : public Work {
 public:
  PostedWork(InProcessWait wait, std::vector<std::shared_ptr<PostedReceive>> receives)
      : wait_(std::move(wait)), receives_(std::move(receives)) {}
  PostedWork(const PostedWork&) = delete;
  PostedWork& operator=(const PostedWork&) = delete;
  ~PostedWork() override;

  int source_rank() const override;

 protected:
  bool test() override;
  void block() override;
  void finish() override;

 private:
  bool settled_locked() const;

  InProcessWait wait_;
  std::vector<std::shared_ptr<PostedReceive>> receives_;
};

// recv_matched: takes the first arrived message that matches, once its length is within bounds,
// and receives it where `choose` says (as MPI's matched probe does).
class MatchedWork final : public Work {
 public:
  MatchedWork(InProcessWait wait, MessageKey key, std::uint64_t max_message_bytes, ChooseDestination choose)
      : wait_(std::move(wait)), key_(key), max_message_bytes_(max_message_bytes), choose_(std::move(choose)) {}

  int source_rank() const override;

 protected:
  bool test() override;
  void block() override;

 private:
  InProcessWait wait_;
  MessageKey key_;
  std::uint64_t max_message_bytes_;
  ChooseDestination choose_;
  int source_ = -1;
};

// The first arrived message matching `key` whose length is within `max_message_bytes` (CorruptData,
// leaving it unreceived, otherwise), or nothing yet.
std::optional<TakenMessage> take_bounded(const InProcessWait& wait, const MessageKey& key,
                                         std::uint64_t max_message_bytes);
// As take_bounded, waiting (bounded) for it to arrive.
TakenMessage take_bounded_waiting(const InProcessWait& wait, const MessageKey& key, std::uint64_t max_message_bytes);

}  // namespace tensortree::detail
