// Nodes and links over ucp: one worker per node, progressed only by the thread that calls the
// node's or its links' methods. UCX calls back from inside ucp_worker_progress; the callbacks here
// only record (an arrival, a failure, a connection request), and endpoints are created and closed
// outside them.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "transport/ucx/ucx_check.hpp"
#include "transport/ucx/ucx_handles.hpp"
#include "transport/ucx/ucx_link.hpp"

namespace tensortree::ucx {

namespace {

constexpr unsigned kMessageId = 0x7454;  // the active-message id of every message of a link
// Progress calls that find nothing before a waiting thread sleeps on the worker's descriptor: a
// message that is on its way is taken without a system call.
constexpr int kSpinsBeforeSleep = 4000;
// The longest sleep between progress calls: a transport whose events do not wake the descriptor
// is still progressed.
constexpr auto kLongestSleep = std::chrono::milliseconds(5);
// How long closing an endpoint (flushing what it sent) may take before it is left to later progress.
constexpr auto kCloseWait = std::chrono::seconds(2);
// The same for a link this end gave up on: long enough for a live peer to be told, short enough
// that a hung one costs the caller little.
constexpr auto kGiveUpWait = std::chrono::milliseconds(100);

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

void on_send_done(void*, ucs_status_t status, void* user_data) {
  auto* completion = static_cast<Completion*>(user_data);
  completion->status = status;
  completion->done = true;
}

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

class LinkImpl final : public Link {
 public:
  LinkImpl(std::shared_ptr<NodeImpl> node, Placement placement, std::string peer)
      : node_(std::move(node)), placement_(std::move(placement)), peer_(std::move(peer)) {}
  ~LinkImpl() override {
    close_endpoint();
    release_posted();
  }

  // Creates the endpoint `params` describe, with this link's peer-failure handling.
  ucs_status_t open(ucp_ep_params_t params) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &LinkImpl::on_error;
    params.err_handler.arg = this;
    const ucs_status_t status = ucp_ep_create(node_->worker(), &params, &ep_);
    if (status == UCS_OK) node_->add(ep_, this);
    return status;
  }

  // Returns once the connection is made (every lane wired up).
  void await_connected(Clock::time_point deadline) {
    Completion completion;
    const ucp_request_param_t param = callback_param(&completion);
    const std::optional<ucs_status_t> status = finish(ucp_ep_flush_nbx(ep_, &param), &completion, deadline);
    if (!status) {
      fail_now(std::make_exception_ptr(Timeout(fmt::format("connect: {} did not accept the connection in time", peer_))));
    } else if (*status != UCS_OK) {
      fail_now(std::make_exception_ptr(
          PeerLost(fmt::format("connect: cannot reach {} ({})", peer_, ucs_status_string(*status)))));
    }
    rethrow_failure();
  }

  void send(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            Clock::time_point deadline) override {
    rethrow_failure();
    Completion completion;
    ucp_request_param_t param = callback_param(&completion);
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    const ucs_status_ptr_t request =
        ucp_am_send_nbx(ep_, kMessageId, header.data(), header.size(), data, length, &param);
    const std::optional<ucs_status_t> status = finish(request, &completion, deadline);
    if (!status) {
      fail_now(std::make_exception_ptr(
          Timeout(fmt::format("send: {} did not take a message of {} bytes in time", peer_, length))));
    } else if (*status != UCS_OK) {
      mark_failed(std::make_exception_ptr(
          PeerLost(fmt::format("send: the message to {} failed ({})", peer_, ucs_status_string(*status)))));
    }
    rethrow_failure();
  }

  void post(std::span<const std::byte> header, const std::byte* data, std::size_t length,
            std::shared_ptr<const void> keep, Clock::time_point deadline) override {
    rethrow_failure();
    if (header.size() > kMaxHeaderBytes) throw InvalidArgument("post: a message header of more than 64 bytes");
    auto message = std::make_unique<PostedMessage>();
    std::memcpy(message->header.data(), header.data(), header.size());
    message->keep = std::move(keep);
    message->deadline = deadline;
    ucp_request_param_t param = callback_param(&message->completion);
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    const ucs_status_ptr_t request =
        ucp_am_send_nbx(ep_, kMessageId, message->header.data(), header.size(), data, length, &param);
    if (request == nullptr) return;  // gone already
    if (UCS_PTR_IS_ERR(request)) {
      mark_failed(std::make_exception_ptr(PeerLost(fmt::format(
          "post: the message to {} failed ({})", peer_, ucs_status_string(UCS_PTR_STATUS(request))))));
      rethrow_failure();
    }
    message->request = request;
    posted_.push_back(std::move(message));
  }

  std::size_t posted() override {
    ucp_worker_progress(node_->worker());
    reap_posted();
    rethrow_failure();
    return posted_.size();
  }

  std::optional<Arrival> receive(Clock::time_point deadline) override {
    node_->progress_until([&] { return !arrivals_.empty() || failure_; }, deadline);
    if (!arrivals_.empty()) {
      Arrival next = std::move(arrivals_.front());
      arrivals_.pop_front();
      return next;
    }
    rethrow_failure();
    return std::nullopt;
  }

  void fail(std::exception_ptr error) override { fail_now(std::move(error)); }
  bool failed() const override { return failure_ != nullptr; }
  const std::string& peer() const override { return peer_; }

  // ---- from the node's callbacks (inside progress: record only) ----------------------------------
  void mark_failed(std::exception_ptr error) {
    if (!failure_) failure_ = std::move(error);
  }
  void arrived(Arrival arrival) { arrivals_.push_back(std::move(arrival)); }
  // Where the message `header` announces goes: a buffer of at least `length` bytes, or null after
  // failing the link (the placement refused it).
  StoragePtr place(std::span<const std::byte> header, std::size_t length) {
    try {
      if (header.size() > kMaxHeaderBytes) {
        throw CorruptData(fmt::format("{} sent a message header of {} bytes (at most {})", peer_, header.size(),
                                      kMaxHeaderBytes));
      }
      StoragePtr buffer = placement_(peer_, header, length);
      if (length > 0 && (!buffer || buffer->nbytes() < length || !buffer->device().is_cpu())) {
        throw InvalidArgument(fmt::format("the buffer for a message of {} bytes from {} is too small", length, peer_));
      }
      return buffer;
    } catch (...) {
      mark_failed(std::current_exception());
      return nullptr;
    }
  }

 private:
  static void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* link = static_cast<LinkImpl*>(arg);
    link->peer_gone_ = true;
    link->mark_failed(std::make_exception_ptr(
        PeerLost(fmt::format("the connection to {} broke ({})", link->peer_, ucs_status_string(status)))));
  }

  static ucp_request_param_t callback_param(Completion* completion) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &on_send_done;
    param.user_data = completion;
    return param;
  }

  // Waits for an operation of this link: its status, UCS_ERR_CANCELED when the link failed first,
  // nullopt past the deadline (the endpoint is then closed).
  std::optional<ucs_status_t> finish(ucs_status_ptr_t request, Completion* completion, Clock::time_point deadline) {
    if (request == nullptr) return UCS_OK;
    if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
    const bool in_time = node_->progress_until([&] { return completion->done || failure_; }, deadline,
                                               NodeImpl::Waiting::ForOwnOperation);
    const bool done = completion->done;
    const ucs_status_t status = completion->status;
    // Released, the request calls back no more; the endpoint is closed before it is left unfinished.
    if (!done) close_endpoint(true);
    ucp_request_free(request);
    if (!in_time && !failure_) return std::nullopt;
    return done ? status : UCS_ERR_CANCELED;
  }

  void fail_now(std::exception_ptr error) {
    mark_failed(std::move(error));
    close_endpoint();
  }

  void rethrow_failure() {
    if (!failure_) return;
    close_endpoint();
    std::rethrow_exception(failure_);
  }

  // Lets go of the posted messages that have gone; fails the link when one failed or the oldest
  // outlived its deadline.
  void reap_posted() {
    while (!posted_.empty() && posted_.front()->completion.done) {
      const std::unique_ptr<PostedMessage> message = std::move(posted_.front());
      posted_.pop_front();
      ucp_request_free(message->request);
      if (message->completion.status != UCS_OK) {
        mark_failed(std::make_exception_ptr(PeerLost(fmt::format("post: the message to {} failed ({})", peer_,
                                                                 ucs_status_string(message->completion.status)))));
      }
    }
    if (!posted_.empty() && !failure_ && Clock::now() >= posted_.front()->deadline) {
      fail_now(std::make_exception_ptr(
          Timeout(fmt::format("post: {} did not take a posted message in time", peer_))));
    }
  }

  // Posted messages not gone when the link closes: the endpoint was closed with force, which
  // cancels them; released, their requests call back no more, and their bytes may go.
  void release_posted() {
    for (const std::unique_ptr<PostedMessage>& message : posted_) ucp_request_free(message->request);
    posted_.clear();
  }

  // A healthy link flushes what it sent and waits for that; a link this end gave up on (garbage,
  // silence) starts the same close, which tells the peer, and waits briefly; one whose peer is
  // gone, or whose operation is abandoned (`force`), is released at once.
  void close_endpoint(bool force = false) {
    if (!ep_) return;
    const ucp_ep_h ep = std::exchange(ep_, nullptr);
    node_->remove(ep, this);
    // A failed link's posted messages will not go: cancelled with the endpoint.
    if (failure_ && !posted_.empty()) force = true;
    if (force || peer_gone_) {
      node_->close(ep, UCP_EP_CLOSE_FLAG_FORCE, Clock::duration::zero());
    } else {
      node_->close(ep, 0, failure_ ? Clock::duration(kGiveUpWait) : Clock::duration(kCloseWait));
    }
  }

  std::shared_ptr<NodeImpl> node_;
  Placement placement_;
  std::string peer_;
  ucp_ep_h ep_ = nullptr;
  std::deque<Arrival> arrivals_;
  std::deque<std::unique_ptr<PostedMessage>> posted_;  // in the order posted
  std::exception_ptr failure_;
  bool peer_gone_ = false;  // UCX reported the connection broken
};

NodeImpl::NodeImpl(const std::optional<std::string>& listen_on) : worker_(context_.get()) {
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  handler.id = kMessageId;
  handler.cb = &NodeImpl::on_message;
  handler.arg = this;
  TT_UCX_CHECK(ucp_worker_set_am_recv_handler(worker_.get(), &handler));
  if (listen_on) listener_.emplace(worker_.get(), parse_address(*listen_on, true), &NodeImpl::on_connection, this);
}

NodeImpl::~NodeImpl() {
  for (ucp_conn_request_h request : requests_) ucp_listener_reject(listener_->get(), request);
  // Receives still under way belong to links already closed: their buffers stay alive until UCX
  // lets them go with the worker.
  progress_until([&] { return pending_.empty() && closing_.empty(); }, Clock::now() + kCloseWait,
                 Waiting::ForOwnOperation);
  for (PendingReceive* pending : pending_) pending->link = nullptr;
  for (void* request : closing_) ucp_request_free(request);
}

void NodeImpl::close(ucp_ep_h ep, unsigned flags, Clock::duration wait) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &NodeImpl::on_closed;
  param.user_data = this;
  param.flags = flags;
  void* const request = ucp_ep_close_nbx(ep, &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  closing_.insert(request);
  progress_until([&] { return !closing_.contains(request); }, Clock::now() + wait, Waiting::ForOwnOperation);
}

void NodeImpl::on_closed(void* request, ucs_status_t, void* user_data) {
  static_cast<NodeImpl*>(user_data)->closing_.erase(request);
  ucp_request_free(request);
}

std::string NodeImpl::address() const {
  if (!listener_) throw InvalidArgument("address: this node does not listen");
  sockaddr_storage bound = listener_->bound_address();
  std::string text = address_text(bound);
  const bool wildcard = text.starts_with("0.0.0.0:") || text.starts_with("[::]:");
  if (!wildcard) return text;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return text;
  return fmt::format("{}{}", host, text.substr(text.rfind(':')));
}

std::unique_ptr<Link> NodeImpl::connect(const std::string& address, Placement placement, Clock::time_point deadline) {
  const sockaddr_storage target = parse_address(address, false);
  auto link = std::make_unique<LinkImpl>(shared_from_this(), std::move(placement), address_text(target));
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&target);
  params.sockaddr.addrlen = address_length(target);
  if (const ucs_status_t status = link->open(params); status != UCS_OK) {
    throw PeerLost(fmt::format("connect: cannot reach {} ({})", address, ucs_status_string(status)));
  }
  link->await_connected(deadline);
  return link;
}

std::unique_ptr<Link> NodeImpl::accept(Placement placement, Clock::time_point deadline) {
  if (!listener_) throw InvalidArgument("accept: this node does not listen");
  // A request whose endpoint cannot be made (its peer gone meanwhile) is passed over.
  while (progress_until([&] { return !requests_.empty(); }, deadline)) {
    const ucp_conn_request_h request = requests_.front();
    requests_.pop_front();
    std::string peer = "a peer";
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(request, &attr) == UCS_OK) peer = address_text(attr.client_address);
    auto link = std::make_unique<LinkImpl>(shared_from_this(), placement, std::move(peer));
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    params.conn_request = request;
    if (link->open(params) == UCS_OK) return link;
  }
  return nullptr;
}

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

void NodeImpl::remove(ucp_ep_h ep, LinkImpl* link) {
  links_.erase(ep);
  for (PendingReceive* pending : pending_) {
    if (pending->link == link) pending->link = nullptr;
  }
}

void NodeImpl::on_connection(ucp_conn_request_h request, void* arg) {
  static_cast<NodeImpl*>(arg)->requests_.push_back(request);
}

ucs_status_t NodeImpl::on_message(void* arg, const void* header, std::size_t header_length, void* data,
                                  std::size_t length, const ucp_am_recv_param_t* param) {
  auto& node = *static_cast<NodeImpl*>(arg);
  const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  const auto refuse = [&](ucs_status_t why) { return rendezvous ? why : UCS_OK; };
  LinkImpl* link = nullptr;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0) {
    const auto found = node.links_.find(param->reply_ep);
    if (found != node.links_.end()) link = found->second;
  }
  if (!link || link->failed()) return refuse(UCS_ERR_CANCELED);
  const std::span<const std::byte> bytes(static_cast<const std::byte*>(header), header_length);
  StoragePtr buffer = link->place(bytes, length);
  if (link->failed()) return refuse(UCS_ERR_REJECTED);
  if (!rendezvous) {
    if (length > 0) std::memcpy(buffer->data(), data, length);
    link->arrived({{bytes.begin(), bytes.end()}, std::move(buffer), length});
    return UCS_OK;
  }
  auto* pending = new PendingReceive{&node, link, {bytes.begin(), bytes.end()}, buffer, length};
  ucp_request_param_t receive{};
  receive.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  receive.cb.recv_am = &NodeImpl::on_received;
  receive.user_data = pending;
  const ucs_status_ptr_t request = ucp_am_recv_data_nbx(node.worker(), data, buffer->data(), length, &receive);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    node.finish_receive(pending, UCS_PTR_STATUS(request));
  } else {
    node.pending_.insert(pending);
  }
  // UCX owns the descriptor from ucp_am_recv_data_nbx on.
  return UCS_INPROGRESS;
}

void NodeImpl::on_received(void* request, ucs_status_t status, std::size_t, void* user_data) {
  auto* pending = static_cast<PendingReceive*>(user_data);
  pending->node->pending_.erase(pending);
  pending->node->finish_receive(pending, status);
  ucp_request_free(request);
}

void NodeImpl::finish_receive(PendingReceive* pending, ucs_status_t status) {
  const std::unique_ptr<PendingReceive> owner(pending);
  if (!pending->link) return;
  if (status == UCS_OK) {
    pending->link->arrived({std::move(pending->header), std::move(pending->buffer), pending->length});
  } else {
    pending->link->mark_failed(std::make_exception_ptr(PeerLost(fmt::format(
        "a message of {} bytes from {} did not arrive ({})", pending->length, pending->link->peer(),
        ucs_status_string(status)))));
  }
}

}  // namespace

std::shared_ptr<Node> listening_node(const std::string& address) {
  return std::make_shared<NodeImpl>(address);
}

std::shared_ptr<Node> connecting_node() { return std::make_shared<NodeImpl>(std::nullopt); }

}  // namespace tensortree::ucx
