// The implementation of ucx_link.hpp's Node and Link, shared by ucx_node.cpp (NodeImpl: the worker,
// its progress, UCX's callbacks) and ucx_link_impl.cpp (LinkImpl: one endpoint). One worker per
// node, progressed only by the thread that calls the node's or its links' methods. UCX calls back
// from inside ucp_worker_progress; the callbacks only record (an arrival, a failure, a connection
// request), and endpoints are created and closed outside them. Internal to transport/ucx.
#pragma once

#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transport/ucx/ucx_check.hpp"
#include "transport/ucx/ucx_handles.hpp"
#include "transport/ucx/ucx_link.hpp"

namespace tensortree::ucx {

inline constexpr unsigned kMessageId = 0x7454;  // the active-message id of every message of a link
// Progress calls that find nothing before a waiting thread sleeps on the worker's descriptor: a
// message that is on its way is taken without a system call.
inline constexpr int kSpinsBeforeSleep = 4000;
// The longest sleep between progress calls: a transport whose events do not wake the descriptor
// is still progressed.
inline constexpr auto kLongestSleep = std::chrono::milliseconds(5);
// How long closing an endpoint (flushing what it sent) may take before it is left to later progress.
inline constexpr auto kCloseWait = std::chrono::seconds(2);
// The same for a link this end gave up on: long enough for a live peer to be told, short enough
// that a hung one costs the caller little.
inline constexpr auto kGiveUpWait = std::chrono::milliseconds(100);

// What a nonblocking request reports on completion, on the stack of the caller that waits for it:
// a request that does not complete in time is released (ucp_request_free) before the caller
// returns, and a released request calls back no more.
struct Completion {
  bool done = false;
  ucs_status_t status = UCS_OK;
};

// A message posted without waiting: its own copy of the header (UCX reads it until the send
// completes), the completion its callback writes, and what keeps the bytes alive until then.
struct PostedMessage {
  std::array<std::byte, kMaxHeaderBytes> header{};
  Completion completion;
  void* request = nullptr;  // null once the send completed
  std::shared_ptr<const void> keep;
  Clock::time_point deadline;
};

// The callback of a send whose user data is its Completion.
void on_send_done(void* request, ucs_status_t status, void* user_data);

class LinkImpl;
class NodeImpl final : public Node, public std::enable_shared_from_this<NodeImpl> {
 public:
  explicit NodeImpl(const std::optional<std::string>& listen_on);
  ~NodeImpl() override;

  std::string address() const override;
  std::unique_ptr<Link> connect(const std::string& address, Placement placement, Clock::time_point deadline) override;
  std::unique_ptr<Link> accept(Placement placement, Clock::time_point deadline) override;

  ucp_worker_h worker() const { return worker_.get(); }
  // Progresses the worker until `done()` holds (true) or `deadline` passes (false). Waiting for
  // messages to come (`Waiting::ForPeer`) it sleeps on the worker's descriptor when nothing
  // happens; waiting for its own operation (a send, a close) it never sleeps, since a transport
  // that needs to write more (a full socket) does not wake the descriptor.
  enum class Waiting { ForPeer, ForOwnOperation };
  template <class Done>
  bool progress_until(Done&& done, Clock::time_point deadline, Waiting waiting = Waiting::ForPeer);

  void add(ucp_ep_h ep, LinkImpl* link) { links_[ep] = link; }
  void remove(ucp_ep_h ep, LinkImpl* link);
  // Closes `ep` (ucp_ep_close_nbx `flags`), waiting at most `wait`; a close not finished by then
  // completes under later progress, or is released when the node goes.
  void close(ucp_ep_h ep, unsigned flags, Clock::duration wait);

 private:
  struct PendingReceive {
    NodeImpl* node;
    LinkImpl* link;  // null once the link is gone
    std::vector<std::byte> header;
    StoragePtr buffer;
    std::size_t length;
  };

  static void on_connection(ucp_conn_request_h request, void* arg);
  static ucs_status_t on_message(void* arg, const void* header, std::size_t header_length, void* data,
                                 std::size_t length, const ucp_am_recv_param_t* param);
  static void on_received(void* request, ucs_status_t status, std::size_t length, void* user_data);
  static void on_closed(void* request, ucs_status_t status, void* user_data);
  void finish_receive(PendingReceive* pending, ucs_status_t status);

  UcpContext context_;
  UcpWorker worker_;
  std::optional<UcpListener> listener_;
  std::deque<ucp_conn_request_h> requests_;
  std::unordered_map<ucp_ep_h, LinkImpl*> links_;
  std::unordered_set<PendingReceive*> pending_;
  std::unordered_set<void*> closing_;
};

template <class Done>
bool NodeImpl::progress_until(Done&& done, Clock::time_point deadline, Waiting waiting) {
  int idle = 0;
  while (!done()) {
    if (ucp_worker_progress(worker_.get()) != 0) {
      // Events of other links count too: a busy neighbour must not hold this wait past its deadline.
      idle = 0;
      if (Clock::now() >= deadline) return done();
      continue;
    }
    if (done()) break;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    if (++idle < kSpinsBeforeSleep) continue;
    if (waiting == Waiting::ForOwnOperation) {
      std::this_thread::yield();
      continue;
    }
    const ucs_status_t armed = ucp_worker_arm(worker_.get());
    if (armed == UCS_ERR_BUSY) continue;
    TT_UCX_CHECK(armed);
    const auto nap = std::min<Clock::duration>(deadline - now, kLongestSleep);
    pollfd fd{worker_.event_fd(), POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(nap).count()));
  }
  return true;
}

}  // namespace tensortree::ucx
