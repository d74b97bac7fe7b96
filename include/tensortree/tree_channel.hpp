// Tree channels: whole TensorTrees between processes that come and go, over ZeroMQ (TCP), safe on a
// network nobody vouches for. A learner binds a TreeListener and accepts channels at any time; an
// actor reaches it with TreeChannel::connect(address). Only the job's peers get in: every channel is
// authenticated and encrypted with the job's credential (channel_credential.hpp; CURVE), and a peer
// without it is refused inside the handshake, before any byte of it reaches the channel. Each
// channel is its own failure domain: a peer that dies, hangs or sends garbage ends that channel with
// a typed error (PeerLost, Timeout, CorruptData or SchemaMismatch) within its timeout, and nothing
// else; a peer that closes its end in order ends it with ChannelClosed, after everything it sent.
// Bytes from strangers meet ZeroMQ's own wire parser, fuzzed upstream, never ours.
//
// Wire: every message is a 16-byte frame header (magic "TTCF", version 2, kind, sequence number;
// integers little-endian) and one payload. Each end's first frame is a credit frame (its header
// 24 bytes longer: trees taken, window in trees and bytes), sent again as its caller takes trees;
// a close frame is a channel's last. The first tree of a layout is preceded by a schema frame
// (Schema::encode(), as init_remote sends it); a data frame carries the consolidated buffer
// followed by the 64-byte wire header of transfer.hpp, exactly the message TensorTree::send moves.
// A layout is sent again after a reconnect or when the sender's changes. A listener and the
// channels it accepted are driven by one thread; a connected channel by one. Host trees go as they
// are. CUDA trees are staged through the host: packed on their GPU, copied into pooled page-locked
// memory and sent from there, then copied onto the receiving thread's current GPU.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tensortree/channel_credential.hpp"
#include "tensortree/export.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

namespace detail {
struct ChannelAccess;
}

struct ChannelOptions {
  // Who may connect: the job's credential. Unset, it is read from TENSORTREE_CHANNEL_KEY
  // (InvalidArgument when that is unset too), unless plain_loopback.
  std::optional<ChannelCredential> credential{};
  // Plain channels without a credential, on loopback addresses only (127.0.0.0/8): a named opt-in
  // for tests and one host; a listener or connect elsewhere without a credential is InvalidArgument.
  bool plain_loopback = false;
  // The longest any call waits on the peer: a connect that is not accepted, a send the peer does
  // not take, and the silence of a peer (no tree and no keepalive) that a receiver tolerates.
  // Past it the channel ends with Timeout.
  std::chrono::milliseconds timeout{5000};
  // The largest tree (consolidated bytes) and encoded schema a peer may announce: larger is
  // CorruptData, refused before anything is allocated.
  std::uint64_t max_tree_bytes = std::uint64_t{1} << 34;
  std::uint64_t max_schema_bytes = std::uint64_t{1} << 24;
  // The credit this end grants its peer, what bounds the memory a channel holds: trees the peer
  // may have sent that this end's caller has not yet taken (recv), and their bytes. A tree larger
  // than max_bytes_in_flight goes only when nothing else is in flight, so a receiver holds at most
  // max(max_bytes_in_flight, its largest tree) for a channel. A sender with no credit left waits in
  // send() (at most the timeout), and post() keeps only the newest tree waiting; a peer that sends
  // beyond its credit ends its channel with CorruptData.
  std::uint64_t max_trees_in_flight = 64;
  std::uint64_t max_bytes_in_flight = std::uint64_t{64} << 20;
};

// What a channel moved, counted per message.
struct ChannelStats {
  std::uint64_t schemas_sent = 0;
  std::uint64_t trees_sent = 0;
  std::uint64_t keepalives_sent = 0;
  std::uint64_t schemas_received = 0;
  std::uint64_t trees_received = 0;
  std::uint64_t keepalives_received = 0;
};

class TT_API TreeChannel {
 public:
  // A channel to the listener at `address` ("host:port", as TreeListener::address() gives it),
  // once the listener has accepted it. PeerLost "nothing listens at host:port (is the learner
  // up?)"; InvalidArgument when the listener refuses this process's credential; Timeout when the
  // listener does not accept within options.timeout.
  static TreeChannel connect(const std::string& address, const ChannelOptions& options = {});

  TreeChannel(TreeChannel&&) noexcept;
  TreeChannel& operator=(TreeChannel&&) noexcept;
  ~TreeChannel();

  // Sends the tree as one message (its layout first, once), once the peer's credit allows (see
  // ChannelOptions): waits at most the timeout for it, then Timeout. The tree may be changed again
  // when send returns.
  void send(const TensorTree& tree);
  // Sends `tree` without waiting for the peer: packs it (the layout first, once) and returns at
  // once; the bytes go out as this channel's calls progress (any call, or flush()). One posted tree
  // is on its way at a time, and goes once the peer has taken every tree before it; one posted
  // meanwhile waits in a single slot, where a newer post replaces it unsent: a slow peer is sent
  // the newest tree, never a queue, holds at most one unread, and the sender never waits for it.
  // send() and keepalive() first finish what was posted.
  void post(const TensorTree& tree);
  // Progresses what was posted, waiting at most `wait` for all of it to go: true when nothing is
  // left to send.
  bool flush(std::chrono::milliseconds wait = std::chrono::milliseconds{0});
  // Tells the peer this end is alive, for a sender that sends no tree for longer than the
  // receiver's timeout.
  void keepalive();

  // The next tree, as a consolidated tree whose buffer comes from the channel's pool (reused once
  // the caller lets go of the tree). Timeout, which ends the channel, when the peer has sent
  // nothing for options.timeout.
  TensorTree recv();
  // recv() that waits at most `wait` for a tree: nullopt when none arrived (the channel stays
  // open unless the peer has been silent for longer than options.timeout).
  std::optional<TensorTree> try_recv(std::chrono::milliseconds wait);
  // recv() into a tree of the sender's layout (SchemaMismatch otherwise, the tree unchanged and the
  // channel open).
  void recv_into(TensorTree& tree);

  // False once the channel has failed or been closed; its calls then throw why.
  bool is_open() const;
  // Sends what was posted (waiting at most the timeout), then a close frame, and closes: the peer
  // receives every tree sent before it, then its calls throw ChannelClosed. The destructor closes so
  // too; this end's calls throw ChannelClosed afterwards.
  void close();
  // "host:port" of the other end.
  const std::string& peer() const;
  ChannelStats stats() const;

  struct State;

 private:
  explicit TreeChannel(std::unique_ptr<State> state);
  friend class TreeListener;
  friend struct detail::ChannelAccess;  // posts one packed tree to many channels (the weights)
  std::unique_ptr<State> state_;
};

class TT_API TreeListener {
 public:
  // Listens on `address`: "host:port", "0.0.0.0:port" (every interface) or ":0" (a free port).
  // The channels it accepts use `options`. InvalidArgument "host:port is already in use".
  static TreeListener bind(const std::string& address, const ChannelOptions& options = {});

  TreeListener(TreeListener&&) noexcept;
  TreeListener& operator=(TreeListener&&) noexcept;
  ~TreeListener();

  // What actors pass to TreeChannel::connect.
  std::string address() const;
  // The next channel an actor opened, waiting at most `wait` for one; nullopt when none came.
  std::optional<TreeChannel> accept(std::chrono::milliseconds wait = std::chrono::milliseconds{0});

 private:
  struct State;
  explicit TreeListener(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tensortree
