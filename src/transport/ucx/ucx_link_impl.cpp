// LinkImpl's operations: sends that wait, posted sends reaped as they complete, receives, and the
// ways a link fails and closes its endpoint.
#include "transport/ucx/ucx_link_impl.hpp"

#include <cstring>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::ucx {

void on_send_done(void*, ucs_status_t status, void* user_data) {
  auto* completion = static_cast<Completion*>(user_data);
  completion->status = status;
  completion->done = true;
}

LinkImpl::~LinkImpl() {
  close_endpoint();
  release_posted();
}

ucs_status_t LinkImpl::open(ucp_ep_params_t params) {
  params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &LinkImpl::on_error;
  params.err_handler.arg = this;
  const ucs_status_t status = ucp_ep_create(node_->worker(), &params, &ep_);
  if (status == UCS_OK) node_->add(ep_, this);
  return status;
}

void LinkImpl::await_connected(Clock::time_point deadline) {
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

void LinkImpl::send(std::span<const std::byte> header, const std::byte* data, std::size_t length,
                    Clock::time_point deadline) {
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

void LinkImpl::post(std::span<const std::byte> header, const std::byte* data, std::size_t length,
                    std::shared_ptr<const void> keep, Clock::time_point deadline) {
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

std::size_t LinkImpl::posted() {
  ucp_worker_progress(node_->worker());
  reap_posted();
  rethrow_failure();
  return posted_.size();
}

std::optional<Arrival> LinkImpl::receive(Clock::time_point deadline) {
  node_->progress_until([&] { return !arrivals_.empty() || failure_; }, deadline);
  if (!arrivals_.empty()) {
    Arrival next = std::move(arrivals_.front());
    arrivals_.pop_front();
    return next;
  }
  rethrow_failure();
  return std::nullopt;
}

StoragePtr LinkImpl::place(std::span<const std::byte> header, std::size_t length) {
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

void LinkImpl::on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* link = static_cast<LinkImpl*>(arg);
  link->peer_gone_ = true;
  link->mark_failed(std::make_exception_ptr(
      PeerLost(fmt::format("the connection to {} broke ({})", link->peer_, ucs_status_string(status)))));
}

ucp_request_param_t LinkImpl::callback_param(Completion* completion) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &on_send_done;
  param.user_data = completion;
  return param;
}

std::optional<ucs_status_t> LinkImpl::finish(ucs_status_ptr_t request, Completion* completion,
                                             Clock::time_point deadline) {
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

void LinkImpl::fail_now(std::exception_ptr error) {
  mark_failed(std::move(error));
  close_endpoint();
}

void LinkImpl::rethrow_failure() {
  if (!failure_) return;
  close_endpoint();
  std::rethrow_exception(failure_);
}

void LinkImpl::reap_posted() {
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

void LinkImpl::release_posted() {
  for (const std::unique_ptr<PostedMessage>& message : posted_) ucp_request_free(message->request);
  posted_.clear();
}

void LinkImpl::close_endpoint(bool force) {
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

}  // namespace tensortree::ucx
