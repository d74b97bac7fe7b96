// ChannelSet: the listener's node lists the links that became readable; the set turns those into a
// ring of channel keys, serves the front one a tree's worth (its try_recv(0)) and puts it at the
// back while it has more. The slower duties of a receiver (credit for a caller that stopped taking,
// keepalives, a peer's silence) go in a sweep of every channel a twentieth of the timeout apart,
// instead of in every turn.
#include "tensortree/channel_set.hpp"

#include <algorithm>
#include <deque>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "channel/channel_access.hpp"
#include "channel/channel_state.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

using detail::ChannelAccess;
using detail::Clock;

namespace {

// How far apart the sweeps of a set whose channels have `timeout` are: a silent peer is noticed
// within its timeout + 5%.
Clock::duration sweep_period(std::chrono::milliseconds timeout) {
  return std::max<Clock::duration>(timeout / 20, std::chrono::milliseconds(1));
}

}  // namespace

struct ChannelSet::State {
  struct Entry {
    Key key;
    TreeChannel channel;
    link::Link* link;     // its link, by which the node names it
    bool queued = false;  // in the ring
  };

  std::shared_ptr<link::Node> node;  // the listener's, shared by every channel
  std::vector<Entry> entries;
  std::unordered_map<Key, std::size_t> slot_of;
  std::unordered_map<const link::Link*, Key> key_of_link;
  std::deque<Key> ring;  // channels with something to read, in turn
  std::vector<link::Link*> ready;
  Key next_key = 1;
  std::uint64_t added = 0;
  Clock::duration period = sweep_period(ChannelOptions{}.timeout);
  Clock::time_point next_sweep = Clock::now();

  std::size_t slot(Key key, const char* call) const {
    const auto found = slot_of.find(key);
    if (found == slot_of.end()) {
      throw InvalidArgument(fmt::format("ChannelSet::{}: no channel {} in the set (it ended or was taken out)", call,
                                        key));
    }
    return found->second;
  }

  void queue(Entry& entry) {
    if (entry.queued) return;
    entry.queued = true;
    ring.push_back(entry.key);
  }

  // Moves the last entry into `slot`'s place: removal costs the same however many channels there are.
  TreeChannel erase(std::size_t slot) {
    Entry& entry = entries[slot];
    if (const auto found = key_of_link.find(entry.link); found != key_of_link.end() && found->second == entry.key) {
      key_of_link.erase(found);
    }
    slot_of.erase(entry.key);
    TreeChannel channel = std::move(entry.channel);
    if (slot + 1 != entries.size()) {
      entry = std::move(entries.back());
      slot_of[entry.key] = slot;
    }
    entries.pop_back();
    return channel;
  }

  // The links the node lists as readable, onto the ring, waiting until `until` when none is.
  void collect(Clock::time_point until) {
    ready.clear();
    node->take_ready(ready, until);
    for (const link::Link* link : ready) {
      const auto key = key_of_link.find(link);
      if (key != key_of_link.end()) queue(entries[slot_of.at(key->second)]);
    }
  }

  static bool has_more(TreeChannel::State& channel) {
    return channel.link == nullptr || !channel.unread.empty() || channel.link->readable();
  }

  // One tree of the channel in `slot`, or its end; nullopt when it had neither (credit or a
  // keepalive was all that came).
  std::optional<Event> serve(std::size_t slot) {
    Entry& entry = entries[slot];
    TreeChannel::State& channel = ChannelAccess::state(entry.channel);
    try {
      std::optional<TensorTree> tree = entry.channel.try_recv(std::chrono::milliseconds(0));
      if (has_more(channel)) queue(entry);
      if (!tree) return std::nullopt;
      return Event{entry.key, std::move(tree), nullptr};
    } catch (const Error&) {
      Event ended{entry.key, std::nullopt, std::current_exception()};
      erase(slot);
      return ended;
    }
  }

  // Every channel's credit, posts and keepalives (what a receiving call sends), and a turn for
  // each channel that failed or whose peer has been silent for its timeout (serve ends it).
  void sweep() {
    const Clock::time_point now = Clock::now();
    if (now < next_sweep) return;
    next_sweep = now + period;
    for (Entry& entry : entries) {
      TreeChannel::State& channel = ChannelAccess::state(entry.channel);
      if (!channel.closed_why.empty() || channel.link->failed() || now - channel.last_heard >= channel.options.timeout) {
        queue(entry);
        continue;
      }
      try {
        channel.sending_before_receiving([&] {
          channel.progress_posts();
          channel.report_credit_if_due(/*idle=*/true);
          channel.keep_alive_if_quiet();
        });
      } catch (const Error&) {
        channel.link->fail(std::current_exception());
      }
      if (channel.link->failed()) queue(entry);
    }
  }

  std::optional<Event> next(Clock::time_point deadline) {
    if (entries.empty()) {
      std::this_thread::sleep_until(deadline);
      return std::nullopt;
    }
    for (;;) {
      sweep();
      collect(Clock::now());
      while (!ring.empty()) {
        const Key key = ring.front();
        ring.pop_front();
        const auto found = slot_of.find(key);
        if (found == slot_of.end()) continue;
        entries[found->second].queued = false;
        if (std::optional<Event> event = serve(found->second)) return event;
      }
      if (Clock::now() >= deadline) return std::nullopt;
      collect(std::min(deadline, next_sweep));
      if (ring.empty() && Clock::now() >= deadline) return std::nullopt;
    }
  }
};

ChannelSet::ChannelSet() : state_(std::make_unique<State>()) {}
ChannelSet::ChannelSet(ChannelSet&&) noexcept = default;
ChannelSet& ChannelSet::operator=(ChannelSet&&) noexcept = default;
ChannelSet::~ChannelSet() = default;

ChannelSet::Key ChannelSet::add(TreeChannel channel) {
  if (!ChannelAccess::valid(channel) || !channel.is_open()) {
    throw InvalidArgument("ChannelSet::add: the channel is closed or has failed");
  }
  TreeChannel::State& inside = ChannelAccess::state(channel);
  if (!inside.node) {
    throw InvalidArgument(fmt::format("ChannelSet::add: the channel to {} was made by connect; a set serves the "
                                      "channels a TreeListener accepted", channel.peer()));
  }
  State& set = *state_;
  if (set.entries.empty()) {
    set.node = inside.node;
  } else if (set.node != inside.node) {
    throw InvalidArgument(fmt::format("ChannelSet::add: the channel to {} comes from another listener than the "
                                      "set's channels (one set waits on one listener)", channel.peer()));
  }
  set.period = sweep_period(inside.options.timeout);
  const Key key = set.next_key++;
  link::Link* link = inside.link.get();
  set.key_of_link[link] = key;
  set.slot_of[key] = set.entries.size();
  set.entries.push_back({key, std::move(channel), link});
  set.queue(set.entries.back());  // what arrived before it was added
  ++set.added;
  return key;
}

TreeChannel& ChannelSet::channel(Key key) { return state_->entries[state_->slot(key, "channel")].channel; }

TreeChannel ChannelSet::remove(Key key) { return state_->erase(state_->slot(key, "remove")); }

bool ChannelSet::contains(Key key) const { return state_->slot_of.contains(key); }

std::size_t ChannelSet::size() const { return state_->entries.size(); }

std::uint64_t ChannelSet::added() const { return state_->added; }

ChannelSet::Key ChannelSet::key_at(std::size_t index) const { return state_->entries.at(index).key; }

std::optional<ChannelSet::Event> ChannelSet::next(std::chrono::milliseconds wait) {
  return state_->next(Clock::now() + wait);
}

}  // namespace tensortree
