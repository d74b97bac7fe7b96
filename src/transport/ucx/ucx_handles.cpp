#include "transport/ucx/ucx_handles.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>
#include <memory>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "transport/ucx/ucx_check.hpp"

namespace tensortree::ucx {

UcpContext::UcpContext() {
  ucp_config_t* config = nullptr;
  TT_UCX_CHECK(ucp_config_read(nullptr, nullptr, &config));
  const std::unique_ptr<ucp_config_t, decltype(&ucp_config_release)> config_owner(config, &ucp_config_release);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  TT_UCX_CHECK(ucp_init(&params, config, &handle_));
}

UcpContext::~UcpContext() { ucp_cleanup(handle_); }

UcpWorker::UcpWorker(ucp_context_h context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  TT_UCX_CHECK(ucp_worker_create(context, &params, &handle_));
  const ucs_status_t status = ucp_worker_get_efd(handle_, &event_fd_);
  if (status != UCS_OK) {
    ucp_worker_destroy(handle_);
    detail::throw_ucx_error(status, "ucp_worker_get_efd", __FILE__, __LINE__);
  }
}

UcpWorker::~UcpWorker() { ucp_worker_destroy(handle_); }

UcpListener::UcpListener(ucp_worker_h worker, const sockaddr_storage& address,
                         ucp_listener_conn_callback_t on_request, void* arg) {
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
  params.sockaddr.addrlen = address_length(address);
  params.conn_handler.cb = on_request;
  params.conn_handler.arg = arg;
  TT_UCX_CHECK(ucp_listener_create(worker, &params, &handle_));
}

UcpListener::~UcpListener() { ucp_listener_destroy(handle_); }

sockaddr_storage UcpListener::bound_address() const {
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  TT_UCX_CHECK(ucp_listener_query(handle_, &attr));
  return attr.sockaddr;
}

sockaddr_storage parse_address(const std::string& address, bool for_listening) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    throw InvalidArgument(fmt::format("'{}' is not an address: expected host:port", address));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (for_listening ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (status != 0) {
    throw InvalidArgument(fmt::format("'{}' is not an address: {}", address, gai_strerror(status)));
  }
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, &freeaddrinfo);
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  return out;
}

socklen_t address_length(const sockaddr_storage& address) {
  return address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

std::string address_text(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(in6.sin6_port));
  }
  const auto& in = reinterpret_cast<const sockaddr_in&>(address);
  inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
  return fmt::format("{}:{}", host, ntohs(in.sin_port));
}

}  // namespace tensortree::ucx
