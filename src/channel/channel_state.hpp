// What a TreeChannel is inside: its link, the credit each way, its sending side (the layout the
// peer holds, the posting slot; channel_sending.cpp) and its receiving side (frames checked as
// they arrive, trees its caller has not taken; channel_receiving.cpp). One thread drives it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "channel/channel_credit.hpp"
#include "channel/channel_frame.hpp"
#include "channel/wire_tree.hpp"
#include "core/buffer_pool.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/tree_channel.hpp"
#include "transport/link/message_link.hpp"

namespace tensortree {

namespace detail {

using link::Clock;

// What a received tree refers to: its layout and the buffer it arrived in.
struct ArrivedTree {
  std::shared_ptr<const Schema> schema;
  StoragePtr buffer;
};

// A schema or data frame that arrived and that the caller has not taken yet.
struct UnreadFrame {
  FrameKind kind;
  link::Arrival arrival;
};

}  // namespace detail

struct TreeChannel::State {
  using Clock = detail::Clock;

  ChannelOptions options;
  std::shared_ptr<link::Node> node;  // the listener's, for a channel it accepted (a ChannelSet waits on it)
  std::unique_ptr<link::Link> link;
  ChannelStats stats;
  std::string closed_why;    // set by close(): the channel's calls then throw it (ChannelClosed)
  bool peer_closed = false;  // the peer's close frame arrived: once its trees are taken, ChannelClosed

  // Sending: the layout the peer holds (none after a connect), the next sequence number, and the
  // credit the peer granted.
  std::uint64_t sent_fingerprint = 0;
  bool sent_schema = false;
  std::uint64_t send_sequence = 0;
  Clock::time_point last_sent = Clock::now();
  detail::BufferPool outgoing;
  detail::SendCredit send_credit;
  // Posting: the tree handed to the link last (on its way or gone) and the one waiting behind it.
  std::shared_ptr<const detail::WireTree> last_posted;
  std::shared_ptr<const detail::WireTree> waiting;

  // Receiving: the sequence number the next frame must carry and the frames placed and not yet
  // pulled (both checked as frames arrive, inside the link's progress), the credit this end grants,
  // the layout the peer announced last, and when it was last heard from.
  std::uint64_t receive_sequence = 0;
  std::uint64_t placed_frames = 0;
  detail::FrameKind last_placed = detail::FrameKind::Keepalive;
  detail::ReceiveCredit receive_credit;
  std::deque<detail::UnreadFrame> unread;
  std::shared_ptr<const Schema> schema;
  Clock::time_point last_heard = Clock::now();
  detail::BufferPool arrivals;
  // recv()'s trees of a layout of at most kPrototypeBytes are copies of this one (the first such
  // tree), moved to each arrived buffer: copying a tree's structure costs about a third of building
  // it from the schema (some 90 against 230 ns a leaf), most of a receive of many small leaves. It
  // holds the buffer it arrived in, hence the bound.
  static constexpr std::uint64_t kPrototypeBytes = 1 << 20;
  std::optional<TensorTree> prototype;

  explicit State(const ChannelOptions& opts);
  // Closes in order when the caller did not (close_link); then the link goes, before the pools
  // that its progress may still write into.
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  const std::string& link_peer() const { return link->peer(); }
  void check_open() const;
  // ChannelClosed once the peer's close frame was taken.
  void throw_if_peer_closed() const;
  // Any error of a call ends the channel: the link fails with it, and later calls throw it again.
  template <class Body>
  auto guarded(Body&& body) {
    check_open();
    try {
      return body();
    } catch (...) {
      link->fail(std::current_exception());
      throw;
    }
  }
  // The first frame each way: the credit this end grants.
  void open();

  // ---- sending (channel_sending.cpp) ----
  void send_frame(detail::FrameKind kind, const std::byte* data, std::size_t length);
  void post_frame(detail::FrameKind kind, std::shared_ptr<const detail::WireTree> keep,
                  const detail::Credit& credit = {});
  void post_credit(const detail::Credit& credit);
  void keep_alive_if_quiet();
  void send_layout(const Schema& layout);
  void send(const detail::Outgoing& out);
  void post(std::shared_ptr<const detail::WireTree> tree);
  bool progress_posts();
  // What a receiving call sends (posts, credit, keepalives): a failure of the link it meets is
  // thrown by the receive, after the frames that arrived before it; a peer's last trees are taken.
  template <class Body>
  void sending_before_receiving(Body&& body) {
    if (link->failed()) return;
    try {
      body();
    } catch (const Error&) {
      if (!link->failed()) throw;
    }
  }
  bool flush_posts(Clock::time_point until);
  // Waits (reading what arrives) until the peer's credit lets a tree of `bytes` go.
  void await_credit(std::uint64_t bytes, Clock::time_point deadline);
  // close(): what was posted goes, then the close frame; never throws (a failed link is left).
  void close_link(Clock::time_point deadline) noexcept;

  // ---- receiving (channel_receiving.cpp) ----
  link::Placement placement();
  // One frame from the link by `until` (false when none came): credits and keepalives taken at
  // once, schemas and trees kept for the caller.
  bool pull(Clock::time_point until);
  // Reads whatever has arrived, without waiting.
  void drain();
  void report_credit_if_due(bool idle);
  std::optional<detail::ArrivedTree> next_tree(Clock::time_point until);
  detail::ArrivedTree wait_tree();
  void take_schema(const link::Arrival& arrival);
  detail::ArrivedTree take_tree(const link::Arrival& arrival);
  StoragePtr upload(const StoragePtr& staged, std::uint64_t total);
  TensorTree tree_of(detail::ArrivedTree arrived);
};

}  // namespace tensortree
