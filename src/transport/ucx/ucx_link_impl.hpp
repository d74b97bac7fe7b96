// LinkImpl: one endpoint of a NodeImpl (ucx_node_impl.hpp), with UCX's peer-failure handling: what
// ucx_link.hpp's Link is over ucp. Its node's callbacks record into it (an arrival, a failure)
// from inside progress; everything else runs on the thread that drives the node. Internal to
// transport/ucx.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "transport/ucx/ucx_node_impl.hpp"

namespace tensortree::ucx {

class LinkImpl final : public Link {
 public:
  LinkImpl(std::shared_ptr<NodeImpl> node, Placement placement, std::string peer)
      : node_(std::move(node)), placement_(std::move(placement)), peer_(std::move(peer)) {}
  ~LinkImpl() override;

  // Creates the endpoint `params` describe, with this link's peer-failure handling.
  ucs_status_t open(ucp_ep_params_t params);

  // Returns once the connection is made (every lane wired up).
  void await_connected(Clock::time_point deadline);

  void send(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            Clock::time_point deadline) override;

  void post(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            std::shared_ptr<const void> keep, Clock::time_point deadline) override;

  std::size_t posted() override;

  std::optional<Arrival> receive(Clock::time_point deadline) override;

  void fail(std::exception_ptr error) override { fail_now(std::move(error)); }
  bool failed() const override { return failure_ != nullptr; }
  bool readable() const override { return !arrivals_.empty() || failed(); }
  const std::string& peer() const override { return peer_; }

  // ---- from the node's callbacks (inside progress: record only) ----------------------------------
  void mark_failed(std::exception_ptr error) {
    if (!failure_) failure_ = std::move(error);
  }
  void arrived(Arrival arrival) { arrivals_.push_back(std::move(arrival)); }
  // Where the message `header` announces goes: a buffer of at least `length` bytes, or null after
  // failing the link (the placement refused it).
  StoragePtr place(std::span<const std::byte> header, std::size_t length);

 private:
  static void on_error(void* arg, ucp_ep_h, ucs_status_t status);

  static ucp_request_param_t callback_param(Completion* completion);

  // Waits for an operation of this link: its status, UCS_ERR_CANCELED when the link failed first,
  // nullopt past the deadline (the endpoint is then closed).
  std::optional<ucs_status_t> finish(ucs_status_ptr_t request, Completion* completion, Clock::time_point deadline);

  void fail_now(std::exception_ptr error);

  void rethrow_failure();

  // Lets go of the posted messages that have gone; fails the link when one failed or the oldest
  // outlived its deadline.
  void reap_posted();

  // Posted messages not gone when the link closes: the endpoint was closed with force, which
  // cancels them; released, their requests call back no more, and their bytes may go.
  void release_posted();

  // A healthy link flushes what it sent and waits for that; a link this end gave up on (garbage,
  // silence) starts the same close, which tells the peer, and waits briefly; one whose peer is
  // gone, or whose operation is abandoned (`force`), is released at once.
  void close_endpoint(bool force = false);

  std::shared_ptr<NodeImpl> node_;
  Placement placement_;
  std::string peer_;
  ucp_ep_h ep_ = nullptr;
  std::deque<Arrival> arrivals_;
  std::deque<std::unique_ptr<PostedMessage>> posted_;  // in the order posted
  std::exception_ptr failure_;
  bool peer_gone_ = false;  // UCX reported the connection broken
};


}  // namespace tensortree::ucx
