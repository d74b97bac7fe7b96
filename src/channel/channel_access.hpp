// What the channel layer does with a TreeChannel beyond its public calls.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "channel/wire_tree.hpp"
#include "tensortree/tree_channel.hpp"

namespace tensortree::detail {

struct ChannelAccess {
  // TreeChannel::connect, waiting for the listener's welcome until `deadline` rather than the timeout.
  static TreeChannel connect(const std::string& address, const ChannelOptions& options,
                             std::chrono::steady_clock::time_point deadline);
  // TreeChannel::post of a tree packed already and shared with other channels, unless it is the one
  // this channel posted last or holds to post (null: none). Then progresses what the channel
  // sends, and posts a keepalive when it has sent nothing for a third of its timeout: the peer
  // receives only what this side offers, and must not take it for silent.
  static void offer(TreeChannel& channel, std::shared_ptr<const WireTree> tree);
  // What the channel is inside (a ChannelSet serves its channels through it).
  static TreeChannel::State& state(TreeChannel& channel) { return *channel.state_; }
  static bool valid(const TreeChannel& channel) { return channel.state_ != nullptr; }
};

}  // namespace tensortree::detail
