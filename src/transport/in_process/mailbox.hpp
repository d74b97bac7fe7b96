// Mailbox: the messages to one member of an in-process group, matched as MPI's matching engine
// matches them. A message is keyed by channel (the users' point to point, or the collectives'
// own), source and tag. Receives are posted in order; a message that arrives goes to the first
// posted receive it matches, or else waits, in arrival order, among the unexpected messages that
// a later receive or probe takes first-come first-served. So messages from one source on one tag
// never overtake each other, and a receive from any source sees every sender. One mailbox per
// receiving member (not per pair) so that a receive from any source has one order to match in.
//
// Sends are eager: the sender copies its bytes into the matched receive, or into the mailbox, on
// its own thread, and its send is complete at once (MPI may buffer any send this way).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// Which traffic a message belongs to: the collectives' messages never match a user's receive.
enum class Channel : unsigned char { PointToPoint, Collectives };

// What a receive or probe accepts; source may be kAnySource.
struct MessageKey {
  Channel channel = Channel::PointToPoint;
  int source = -1;
  int tag = 0;
};

// A receive posted into a mailbox; settled (under the mailbox's lock) by the message it matched.
struct PostedReceive {
  MessageKey key;
  Tensor destination;  // contiguous host memory
  int receiver = -1;   // the mailbox's rank, for errors
  bool settled = false;
  int source = -1;  // the sender, once settled
  std::exception_ptr error;  // a message of another length than `destination` (its prefix was copied)
};

// A message taken whole by a probe (recv_message, recv_matched).
struct TakenMessage {
  int source = -1;
  std::shared_ptr<const std::vector<std::byte>> bytes;
};

class Mailbox {
 public:
  explicit Mailbox(int rank) : rank_(rank) {}

  // From `source`: into the first posted receive that matches, or kept for a later one.
  void deliver(Channel channel, int source, int tag, const Tensor& contiguous);
  // A receive into `destination`, settled at once by the first unexpected message that matches.
  std::shared_ptr<PostedReceive> post(MessageKey key, Tensor destination);
  // Forgets a receive not yet settled (its Work was dropped); a later message goes elsewhere.
  void cancel(const std::shared_ptr<PostedReceive>& receive);
  // The first unexpected message matching `key`, taken out, once `accept(source, bytes)` has seen
  // its length (it throws to leave the message where it is); nothing if none has arrived.
  std::optional<TakenMessage> take(MessageKey key, const std::function<void(int source, std::uint64_t bytes)>& accept);

  // Blocks until `ready()` (called under the mailbox's lock) or `deadline` (then false).
  bool wait_until(const std::function<bool()>& ready, std::optional<std::chrono::steady_clock::time_point> deadline);
  // `condition()`, evaluated under the mailbox's lock (receives are settled under it).
  bool holds(const std::function<bool()>& condition);
  // How many messages have arrived so far (read in or out of wait_until's `ready`): a wait for a
  // message that a probe would take waits for this to move.
  std::uint64_t arrivals() const { return arrivals_.load(std::memory_order_acquire); }
  // Wakes every wait (Collectives::abort and PeerTransport::abort: the waits check their abort signal).
  void wake();

  // The sequence number of this member's next collective (the tag of its messages): collectives
  // are called in one order on every member, by whichever backend of the group.
  int next_collective();

 private:
  struct Message {
    Channel channel;
    int source;
    int tag;
    std::shared_ptr<const std::vector<std::byte>> bytes;
  };

  static bool matches(const MessageKey& key, Channel channel, int source, int tag);
  void settle_locked(PostedReceive& receive, int source, int tag, const std::byte* bytes, std::size_t nbytes) const;

  int rank_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::list<std::shared_ptr<PostedReceive>> posted_;
  std::deque<Message> unexpected_;
  int collectives_ = 0;
  std::atomic<std::uint64_t> arrivals_{0};
};

// "rank 1 received 7 elements from rank 0 (tag 77) into a tensor of 9 elements", as the MPI
// backend says it (bytes where the length is no whole number of elements).
std::string wrong_length_message(int receiver, int source, int tag, std::uint64_t bytes, const Tensor& destination);

}  // namespace tensortree::detail
