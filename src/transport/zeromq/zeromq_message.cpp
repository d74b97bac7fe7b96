#include "transport/zeromq/zeromq_message.hpp"

#include <cstring>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::zeromq {

namespace {

// What a posted payload's free function releases.
struct Hold {
  std::shared_ptr<const void> keep;
  std::shared_ptr<std::atomic<bool>> released;
};

void release_hold(void*, void* hint) {
  auto* hold = static_cast<Hold*>(hint);
  *hold->released = true;
  delete hold;
}

}  // namespace

// The kernel caps it at net.core.somaxconn (4096 on Linux 5.4 and later).
constexpr int kListenBacklog = 4096;

void configure(zmq::socket_t& socket, const NodeOptions& options, bool server) {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(options.max_message_bytes));
  socket.set(zmq::sockopt::sndhwm, options.queued_messages);
  socket.set(zmq::sockopt::rcvhwm, options.queued_messages);
  const int timeout_ms = static_cast<int>(options.timeout.count());
  socket.set(zmq::sockopt::handshake_ivl, timeout_ms);
  // A silent peer is the channel's to judge (Timeout at its timeout, from the keepalives the channel
  // sends). A connection whose peer vanished without closing it is the kernel's: TCP keepalives
  // from the timeout on end it, and ZeroMQ drops it. Not ZeroMQ's heartbeats: in libzmq 4.3.4 their
  // timer writes to a connection whose input was stopped by a full queue and that then broke, and
  // asserts (stream_engine_base.cpp:331, "!_io_error"), aborting the process.
  const int keepalive_s = std::max(1, timeout_ms / 1000);
  socket.set(zmq::sockopt::tcp_keepalive, 1);
  socket.set(zmq::sockopt::tcp_keepalive_idle, keepalive_s);
  socket.set(zmq::sockopt::tcp_keepalive_intvl, keepalive_s);
  socket.set(zmq::sockopt::tcp_keepalive_cnt, 3);
  // Connections the kernel holds for the listener before ZeroMQ's thread accepts them: with
  // ZeroMQ's 100, a thousand actors (or half-open strangers) arriving at once overflow it, and
  // every connect beyond waits for the kernel's SYN retransmit (1 s, then 3 s, ...).
  if (server) socket.set(zmq::sockopt::backlog, kListenBacklog);
  if (!options.credential) return;
  const ChannelCredential& key = *options.credential;
  if (server) {
    socket.set(zmq::sockopt::curve_server, 1);
    socket.set(zmq::sockopt::curve_secretkey, key.secret_text());
    socket.set(zmq::sockopt::zap_domain, "tensortree");
  } else {
    socket.set(zmq::sockopt::curve_serverkey, key.public_text());
    socket.set(zmq::sockopt::curve_publickey, key.public_text());
    socket.set(zmq::sockopt::curve_secretkey, key.secret_text());
  }
}

Parts receive_parts(zmq::socket_t& socket, const std::string& peer) {
  Parts parts;
  (void)socket.recv(parts.header, zmq::recv_flags::none);
  if (parts.header.more()) {
    (void)socket.recv(parts.payload, zmq::recv_flags::none);
    parts.has_payload = true;
  }
  bool extra = false;
  while (parts.has_payload && parts.payload.more()) {  // drain, then refuse
    (void)socket.recv(parts.payload, zmq::recv_flags::none);
    extra = true;
  }
  if (extra) throw CorruptData(fmt::format("channel link: {} sent a message of more than two parts", peer));
  if (parts.header.size() > link::kMaxHeaderBytes) {
    throw CorruptData(fmt::format("channel link: {} sent a message header of {} bytes; at most {} are accepted", peer,
                                  parts.header.size(), link::kMaxHeaderBytes));
  }
  return parts;
}

link::Arrival place(const Parts& parts, const link::Placement& placement, const std::string& peer) {
  const auto* header = static_cast<const std::byte*>(parts.header.data());
  link::Arrival arrival;
  arrival.header.assign(header, header + parts.header.size());
  arrival.length = parts.has_payload ? parts.payload.size() : 0;
  arrival.buffer = placement(peer, arrival.header, arrival.length);
  if (arrival.length > 0) {
    if (!arrival.buffer || arrival.buffer->nbytes() < arrival.length) {
      throw CorruptData(fmt::format("channel link: no room for the {} bytes from {}", arrival.length, peer));
    }
    std::memcpy(arrival.buffer->data(), parts.payload.data(), arrival.length);
  }
  return arrival;
}

zmq::message_t InFlight::payload(const std::byte* data, std::size_t length, std::shared_ptr<const void> keep,
                                 link::Clock::time_point deadline) {
  auto released = std::make_shared<std::atomic<bool>>(false);
  auto* hold = new Hold{std::move(keep), released};
  // ZeroMQ takes `hold` only once the message exists: until then it is ours to delete.
  zmq::message_t message;
  try {
    message = zmq::message_t(const_cast<std::byte*>(data), length, &release_hold, hold);
  } catch (...) {
    delete hold;
    throw;
  }
  entries_.push_back({deadline, std::move(released)});
  return message;
}

std::size_t InFlight::count() {
  while (!entries_.empty() && entries_.front().released->load()) entries_.pop_front();
  std::size_t held = 0;
  for (const Entry& entry : entries_) held += entry.released->load() ? 0 : 1;
  return held;
}

bool InFlight::overdue(link::Clock::time_point now) { return count() > 0 && entries_.front().deadline <= now; }

void throw_engine_error(const zmq::error_t& error, std::string_view what) {
  throw BackendError(fmt::format("{}: ZeroMQ error {} ({})", what, error.num(), error.what()));
}

}  // namespace tensortree::zeromq
