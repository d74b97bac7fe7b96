// ReconnectingChannel: a TreeChannel while one is open; kept trees (consolidated copies, their
// buffers reused) and a backoff schedule while none is. Every call first connects when an attempt
// is due and sends what was kept, so the trees reach a learner in the order they were sent.
#include "tensortree/reconnecting_channel.hpp"

#include <algorithm>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "channel/channel_access.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

using Clock = std::chrono::steady_clock;

struct ReconnectingChannel::State {
  std::string address;
  ReconnectOptions options;
  std::optional<TreeChannel> channel;
  std::deque<TensorTree> kept;     // oldest first
  std::vector<TensorTree> spare;   // buffers of kept trees that went, for the next ones
  ReconnectStats stats;
  Clock::duration retry;
  Clock::time_point next_attempt = Clock::now();

  State(std::string to, const ReconnectOptions& opts)
      : address(std::move(to)), options(opts), retry(opts.first_retry) {}

  // Runs `body` on the open channel; false when the channel failed under it, which is then dropped
  // and a new one scheduled. What the caller got wrong (NotSupported, InvalidArgument) goes up.
  template <class Body>
  bool attempt(Body&& body) {
    try {
      body(*channel);
      return true;
    } catch (const PeerLost&) {
    } catch (const Timeout&) {
    } catch (const ChannelClosed&) {
    } catch (const CorruptData&) {
    }
    channel.reset();
    ++stats.losses;
    retry = options.first_retry;
    schedule();
    return false;
  }

  void schedule() {
    next_attempt = Clock::now() + retry;
    retry = std::min<Clock::duration>(retry * 2, options.max_retry);
  }

  void connect_if_due() {
    if (channel || Clock::now() < next_attempt) return;
    try {
      channel.emplace(detail::ChannelAccess::connect(address, options.channel, Clock::now() + options.connect_wait));
      ++stats.connections;
      retry = options.first_retry;
    } catch (const PeerLost&) {
      schedule();
    } catch (const Timeout&) {
      schedule();
    }
  }

  void send_kept() {
    while (channel && !kept.empty()) {
      if (!attempt([&](TreeChannel& open) { open.send(kept.front()); })) return;
      spare.push_back(std::move(kept.front()));
      kept.pop_front();
      ++stats.trees_sent;
    }
  }

  bool progress() {
    connect_if_due();
    send_kept();
    return channel.has_value();
  }

  // A copy of `tree` behind the kept ones, in a reused buffer; the oldest goes when full.
  void keep(const TensorTree& tree) {
    if (options.max_kept_trees == 0) {
      ++stats.trees_dropped;
      return;
    }
    TensorTree copy;
    if (kept.size() >= options.max_kept_trees) {
      copy = std::move(kept.front());
      kept.pop_front();
      ++stats.trees_dropped;
    } else if (!spare.empty()) {
      copy = std::move(spare.back());
      spare.pop_back();
    }
    tree.consolidate_into(copy);
    kept.push_back(std::move(copy));
  }
};

ReconnectingChannel::ReconnectingChannel(std::string address, ReconnectOptions options)
    : state_(std::make_unique<State>(std::move(address), options)) {
  state_->connect_if_due();
}
ReconnectingChannel::ReconnectingChannel(ReconnectingChannel&&) noexcept = default;
ReconnectingChannel& ReconnectingChannel::operator=(ReconnectingChannel&&) noexcept = default;
ReconnectingChannel::~ReconnectingChannel() = default;

void ReconnectingChannel::send(const TensorTree& tree) {
  State& state = *state_;
  if (state.progress() && state.kept.empty() && state.attempt([&](TreeChannel& open) { open.send(tree); })) {
    ++state.stats.trees_sent;
    return;
  }
  state.keep(tree);
}

std::optional<ChannelWeights> ReconnectingChannel::take_newest_weights(std::chrono::milliseconds wait) {
  State& state = *state_;
  if (!state.progress()) {
    // No learner: wait what was asked, or until the next attempt, then try once more.
    std::this_thread::sleep_until(std::min(Clock::now() + wait, state.next_attempt));
    if (!state.progress()) return std::nullopt;
  }
  std::optional<ChannelWeights> newest;
  state.attempt([&](TreeChannel& open) { newest = tensortree::take_newest_weights(open, wait); });
  return newest;
}

bool ReconnectingChannel::progress() { return state_->progress(); }

bool ReconnectingChannel::connected() const { return state_->channel.has_value(); }

ReconnectStats ReconnectingChannel::stats() const {
  ReconnectStats stats = state_->stats;
  stats.trees_kept = state_->kept.size();
  return stats;
}

const std::string& ReconnectingChannel::address() const { return state_->address; }

}  // namespace tensortree
