#include "transport/in_process/mailbox.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/peer_transport.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

void copy_bytes(void* destination, const std::byte* source, std::size_t nbytes) {
  if (nbytes > 0) std::memcpy(destination, source, nbytes);
}

}  // namespace

std::string wrong_length_message(int receiver, int source, int tag, std::uint64_t bytes, const Tensor& destination) {
  const std::size_t item = itemsize(destination.dtype());
  const bool whole = item > 0 && bytes % item == 0;
  const std::string unit = whole ? " elements" : " bytes";
  const std::uint64_t sent = whole ? bytes / item : bytes;
  const std::uint64_t room = whole ? static_cast<std::uint64_t>(destination.numel()) : destination.nbytes();
  return fmt::format("rank {} received {}{} from rank {} (tag {}) into a tensor of {}{}", receiver, sent, unit, source,
                     tag, room, unit);
}

bool Mailbox::matches(const MessageKey& key, Channel channel, int source, int tag) {
  return key.channel == channel && key.tag == tag && (key.source == kAnySource || key.source == source);
}

// A message of another length is the receiver's error, as MPI reports it; the prefix that fits is
// copied all the same, as MPI's truncated receive writes it (a node-local frame's header is read
// from there to explain the failure).
void Mailbox::settle_locked(PostedReceive& receive, int source, int tag, const std::byte* bytes,
                            std::size_t nbytes) const {
  const std::size_t room = receive.destination.nbytes();
  copy_bytes(receive.destination.data_ptr(), bytes, std::min(room, nbytes));
  if (nbytes != room) {
    receive.error = std::make_exception_ptr(
        InvalidArgument(wrong_length_message(rank_, source, tag, nbytes, receive.destination)));
  }
  receive.source = source;
  receive.settled = true;
}

void Mailbox::deliver(Channel channel, int source, int tag, const Tensor& contiguous) {
  const auto* bytes = static_cast<const std::byte*>(contiguous.nbytes() > 0 ? contiguous.data_ptr() : nullptr);
  const std::size_t nbytes = contiguous.nbytes();
  {
    const std::lock_guard lock(mutex_);
    const auto found = std::find_if(posted_.begin(), posted_.end(), [&](const std::shared_ptr<PostedReceive>& receive) {
      return matches(receive->key, channel, source, tag);
    });
    if (found != posted_.end()) {
      settle_locked(**found, source, tag, bytes, nbytes);
      posted_.erase(found);
    } else {
      auto copy = std::make_shared<std::vector<std::byte>>(nbytes);
      copy_bytes(copy->data(), bytes, nbytes);
      unexpected_.push_back({channel, source, tag, std::move(copy)});
    }
    arrivals_.fetch_add(1, std::memory_order_acq_rel);
  }
  arrived_.notify_all();
}

std::shared_ptr<PostedReceive> Mailbox::post(MessageKey key, Tensor destination) {
  auto receive = std::make_shared<PostedReceive>();
  receive->key = key;
  receive->destination = std::move(destination);
  receive->receiver = rank_;
  const std::lock_guard lock(mutex_);
  const auto found = std::find_if(unexpected_.begin(), unexpected_.end(), [&](const Message& message) {
    return matches(key, message.channel, message.source, message.tag);
  });
  if (found == unexpected_.end()) {
    posted_.push_back(receive);
    return receive;
  }
  settle_locked(*receive, found->source, found->tag, found->bytes->data(), found->bytes->size());
  unexpected_.erase(found);
  return receive;
}

void Mailbox::cancel(const std::shared_ptr<PostedReceive>& receive) {
  const std::lock_guard lock(mutex_);
  posted_.remove(receive);
}

std::optional<TakenMessage> Mailbox::take(MessageKey key,
                                          const std::function<void(int source, std::uint64_t bytes)>& accept) {
  const std::lock_guard lock(mutex_);
  const auto found = std::find_if(unexpected_.begin(), unexpected_.end(), [&](const Message& message) {
    return matches(key, message.channel, message.source, message.tag);
  });
  if (found == unexpected_.end()) return std::nullopt;
  accept(found->source, found->bytes->size());
  TakenMessage taken{found->source, std::move(found->bytes)};
  unexpected_.erase(found);
  return taken;
}

bool Mailbox::wait_until(const std::function<bool()>& ready,
                         std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock lock(mutex_);
  if (!deadline) {
    arrived_.wait(lock, ready);
    return true;
  }
  return arrived_.wait_until(lock, *deadline, ready);
}

bool Mailbox::holds(const std::function<bool()>& condition) {
  const std::lock_guard lock(mutex_);
  return condition();
}

void Mailbox::wake() {
  // Taken and released, so that a waiter between its check and its sleep cannot miss the wake-up.
  { const std::lock_guard lock(mutex_); }
  arrived_.notify_all();
}

int Mailbox::next_collective() {
  const std::lock_guard lock(mutex_);
  const int tag = collectives_;
  collectives_ = collectives_ == INT32_MAX ? 0 : collectives_ + 1;
  return tag;
}

}  // namespace tensortree::detail
