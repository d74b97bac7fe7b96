// The plain TCP baseline of bench_channel: a socket moving the same bytes as a tree, each message a
// write of the bytes and a read of exactly as many into one preallocated buffer (Boost.Asio's
// blocking sockets, TCP_NODELAY): what the kernel alone costs between the same two places, with
// no framing, no checks, no encryption.
#pragma once

#include <boost/asio.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "bench_channel_sender.hpp"
#include "bench_channel_tree.hpp"

namespace tensortree::bench {

namespace asio = boost::asio;
using asio::ip::tcp;

// "host:port" as an endpoint (host an IPv4 or IPv6 address).
inline tcp::endpoint endpoint_of(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  return {asio::ip::make_address(address.substr(0, colon)),
          static_cast<unsigned short>(std::stoul(address.substr(colon + 1)))};
}

inline std::string address_of(const tcp::endpoint& endpoint) {
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

inline void send_tcp(const std::string& address, TreeShape shape, int count) {
  const std::vector<std::byte> source = raw_pattern(payload_bytes(make_channel_tree(shape)));
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(endpoint_of(address));
  socket.set_option(tcp::no_delay(true));
  send_rounds(
      count, [&] { asio::write(socket, asio::buffer(source)); },
      [&] {
        socket.shutdown(tcp::socket::shutdown_both);
        socket.close();
      });
}

}  // namespace tensortree::bench
