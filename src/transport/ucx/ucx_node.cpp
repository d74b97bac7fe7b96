// NodeImpl's operations: the worker and its listener, connecting and accepting links, progress
// that sleeps on the worker's descriptor when nothing happens, and UCX's callbacks, which only
// record (an arrival, a failure, a connection request).
#include <unistd.h>

#include <cstring>
#include <memory>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "transport/ucx/ucx_link_impl.hpp"
#include "transport/ucx/ucx_node_impl.hpp"

namespace tensortree::ucx {

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

std::shared_ptr<Node> listening_node(const std::string& address) {
  return std::make_shared<NodeImpl>(address);
}

std::shared_ptr<Node> connecting_node() { return std::make_shared<NodeImpl>(std::nullopt); }

}  // namespace tensortree::ucx
