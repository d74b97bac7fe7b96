// Channel addresses ("host:port") as ZeroMQ endpoints ("tcp://host:port"), and back.
#pragma once

#include <string>

namespace tensortree::zeromq {

struct Endpoint {
  std::string host;  // "" or "0.0.0.0": every interface
  int port = 0;

  std::string tcp() const;  // "tcp://host:port", "tcp://*:port" for every interface
  std::string text() const;  // "host:port"
  bool loopback() const;     // 127.0.0.0/8, ::1 or localhost
};

// InvalidArgument naming `what` and the address when it is not "host:port" or ":port".
Endpoint parse_endpoint(const std::string& address, const char* what);
// What a listener bound to `requested` reports, from ZeroMQ's last endpoint ("tcp://0.0.0.0:41231"):
// this host's name in place of a wildcard, so that peers on other hosts can use it.
std::string reported_address(const Endpoint& requested, const std::string& last_endpoint);

}  // namespace tensortree::zeromq
