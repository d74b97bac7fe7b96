#include "transport/zeromq/zeromq_address.hpp"

#include <unistd.h>

#include <array>
#include <charconv>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::zeromq {

namespace {

bool every_interface(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "*"; }

}  // namespace

std::string Endpoint::tcp() const { return fmt::format("tcp://{}:{}", every_interface(host) ? "*" : host, port); }

std::string Endpoint::text() const { return fmt::format("{}:{}", host, port); }

bool Endpoint::loopback() const { return host.starts_with("127.") || host == "localhost" || host == "::1"; }

Endpoint parse_endpoint(const std::string& address, const char* what) {
  const std::size_t colon = address.rfind(':');
  Endpoint endpoint;
  const char* first = address.data() + (colon == std::string::npos ? 0 : colon + 1);
  const char* last = address.data() + address.size();
  const auto [end, error] = std::from_chars(first, last, endpoint.port);
  if (colon == std::string::npos || error != std::errc{} || end != last || endpoint.port < 0 || endpoint.port > 65535) {
    throw InvalidArgument(fmt::format("{}: '{}' is not an address of the form host:port (or :port)", what, address));
  }
  endpoint.host = address.substr(0, colon);
  return endpoint;
}

std::string reported_address(const Endpoint& requested, const std::string& last_endpoint) {
  const std::size_t colon = last_endpoint.rfind(':');
  const std::string port = last_endpoint.substr(colon + 1);
  if (!every_interface(requested.host)) return requested.host + ":" + port;
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "0.0.0.0:" + port;
  return std::string(name.data()) + ":" + port;
}

}  // namespace tensortree::zeromq
