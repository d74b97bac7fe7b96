// The channels of one listener, served from one thread with one readiness wait: a learner adds
// every channel its TreeListener accepts, and next() gives the next tree from whichever channel has
// one, the channels taking turns (round-robin: one tree a turn), or tells that a channel ended.
//
//   ChannelSet actors;
//   for (;;) {
//     while (auto accepted = listener.accept()) actors.add(std::move(*accepted));
//     weights.offer_to(actors);
//     while (auto event = actors.next(std::chrono::milliseconds(1))) {
//       if (event->tree) replay.extend(*event->tree);
//       else report(event->key, event->ended);  // the channel has left the set
//     }
//   }
//
// What a turn costs grows with what arrived, not with how many channels there are: the listener's
// socket lists the channels that have something to read. Every channel's keepalives, credit and
// silence are seen to in a sweep of all of them once every twentieth of the channels' timeout,
// so that a silent peer ends its channel with Timeout within its timeout + 5%.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>

#include "tensortree/export.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/tree_channel.hpp"

namespace tensortree {

class TT_API ChannelSet {
 public:
  // A channel's name in the set: given by add, never reused by the set.
  using Key = std::uint64_t;

  // What next() found: a tree from the channel `key` (a consolidated tree, as TreeChannel::recv
  // gives it), or that channel's end: `ended` holds why (ChannelClosed after every tree its peer
  // sent, PeerLost, Timeout, CorruptData, SchemaMismatch), and the channel has left the set.
  struct Event {
    Key key = 0;
    std::optional<TensorTree> tree;
    std::exception_ptr ended;
  };

  ChannelSet();
  ChannelSet(ChannelSet&&) noexcept;
  ChannelSet& operator=(ChannelSet&&) noexcept;
  ~ChannelSet();

  // Takes a channel that TreeListener::accept gave. All of a set's channels come from one listener
  // (InvalidArgument otherwise, and for a channel that TreeChannel::connect made or that is closed).
  Key add(TreeChannel channel);
  // The channel `key` names, for sending to its peer (InvalidArgument when the set has no such
  // channel: it ended, or was taken out).
  TreeChannel& channel(Key key);
  // Takes the channel out of the set (InvalidArgument when it is not in it).
  TreeChannel remove(Key key);
  bool contains(Key key) const;
  std::size_t size() const;
  // How many channels were ever added: it changes when a new one was.
  std::uint64_t added() const;

  // The next tree or channel end, waiting at most `wait` when none is due; nullopt when none came.
  // A channel that yielded a tree goes after every other channel with a tree waiting.
  std::optional<Event> next(std::chrono::milliseconds wait = std::chrono::milliseconds{0});

  // Calls `visit(key, channel)` for every channel in the set (for instance to offer weights); it
  // must not add or remove channels.
  template <class Visit>
  void for_each(Visit&& visit) {
    for (std::size_t i = 0; i < size(); ++i) {
      const Key key = key_at(i);
      visit(key, channel(key));
    }
  }

 private:
  Key key_at(std::size_t index) const;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tensortree
