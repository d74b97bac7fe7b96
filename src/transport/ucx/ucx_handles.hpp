// One small move-only owner per ucp handle: context, worker, listener. Endpoints close through
// their worker's progress, so the node that progresses it closes them (ucx_node.cpp).
#pragma once

#include <ucp/api/ucp.h>

#include <sys/socket.h>

#include <string>

namespace tensortree::ucx {

class UcpContext {
 public:
  // Active messages, and wake-ups so that a waiting thread can sleep on the worker's descriptor.
  UcpContext();
  ~UcpContext();
  UcpContext(const UcpContext&) = delete;
  UcpContext& operator=(const UcpContext&) = delete;
  ucp_context_h get() const { return handle_; }

 private:
  ucp_context_h handle_ = nullptr;
};

class UcpWorker {
 public:
  // Driven by one thread at a time.
  explicit UcpWorker(ucp_context_h context);
  ~UcpWorker();
  UcpWorker(const UcpWorker&) = delete;
  UcpWorker& operator=(const UcpWorker&) = delete;
  ucp_worker_h get() const { return handle_; }
  // The descriptor that becomes readable when the worker has events (after ucp_worker_arm).
  int event_fd() const { return event_fd_; }

 private:
  ucp_worker_h handle_ = nullptr;
  int event_fd_ = -1;
};

class UcpListener {
 public:
  UcpListener(ucp_worker_h worker, const sockaddr_storage& address, ucp_listener_conn_callback_t on_request,
              void* arg);
  ~UcpListener();
  UcpListener(const UcpListener&) = delete;
  UcpListener& operator=(const UcpListener&) = delete;
  ucp_listener_h get() const { return handle_; }
  // The address it listens on, its port filled in when 0 was asked for.
  sockaddr_storage bound_address() const;

 private:
  ucp_listener_h handle_ = nullptr;
};

// "host:port" as a socket address (IPv4 or IPv6, names resolved); InvalidArgument when it is not one.
sockaddr_storage parse_address(const std::string& address, bool for_listening);
// The length of the socket address `address` holds.
socklen_t address_length(const sockaddr_storage& address);
// The numeric "host:port" of `address`.
std::string address_text(const sockaddr_storage& address);

}  // namespace tensortree::ucx
