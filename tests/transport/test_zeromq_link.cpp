// The ZeroMQ engine under the channels (transport/zeromq), below the public API: messages both ways
// with every byte checked, the credential matrix (none, a wrong key, another job's key, a replayed
// handshake), and hostile bytes at the listening port (17 bytes, random 64 KiB, 10 MiB of zeros,
// 1000 half-open connections, a byte a second): the node survives each, refuses before any message
// reaches it, its descriptors come back and its CPU is idle once the sender is gone.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "tensortree/error.hpp"
#include "transport/zeromq/zeromq_node.hpp"

using namespace tensortree;
using namespace std::chrono_literals;
using link::Clock;

namespace {

zeromq::NodeOptions with(const ChannelCredential& key) { return {.credential = key, .timeout = 1000ms}; }

link::Placement any_placement() {
  return [](const std::string&, std::span<const std::byte>, std::size_t length) -> StoragePtr {
    return length > 0 ? Storage::allocate(length, Device::cpu()) : nullptr;
  };
}

std::vector<std::byte> ranked_bytes(std::size_t n, int rank) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(rank) * 7) % 251);
  return bytes;
}

void check_arrival(const link::Arrival& arrival, std::size_t n, int rank, std::string_view header) {
  CHECK(std::string(reinterpret_cast<const char*>(arrival.header.data()), arrival.header.size()) == header);
  REQUIRE(arrival.length == n);
  const std::vector<std::byte> expected = ranked_bytes(n, rank);
  CHECK(std::memcmp(arrival.buffer->data(), expected.data(), n) == 0);
}

std::span<const std::byte> text(std::string_view s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

// accept() on this thread while `connect` runs on another, as a learner and an actor would.
struct Pair {
  std::unique_ptr<link::Link> accepted;
  std::unique_ptr<link::Link> connected;
};
Pair connect_pair(link::Node& listener, const zeromq::NodeOptions& client) {
  auto actor = std::async(std::launch::async, [&] {
    return zeromq::connecting_node(client)->connect(listener.address(), any_placement(), Clock::now() + 3s);
  });
  Pair pair;
  const auto deadline = Clock::now() + 3s;
  while (!pair.accepted && Clock::now() < deadline) pair.accepted = listener.accept(any_placement(), Clock::now() + 50ms);
  pair.connected = actor.get();
  return pair;
}

// A connect that must fail, with what it threw.
std::string refused_connect(link::Node& listener, const zeromq::NodeOptions& client) {
  auto actor = std::async(std::launch::async, [&]() -> std::string {
    try {
      (void)zeromq::connecting_node(client)->connect(listener.address(), any_placement(), Clock::now() + 2s);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  });
  while (actor.wait_for(0ms) != std::future_status::ready) {
    CHECK(listener.accept(any_placement(), Clock::now() + 20ms) == nullptr);
  }
  return actor.get();
}

int open_descriptors() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  while (::readdir(dir) != nullptr) ++count;
  ::closedir(dir);
  return count;
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// A plain TCP connection to 127.0.0.1:port that sends `bytes` (the garbage matrix's sender).
int raw_connection(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval limit{.tv_sec = 3, .tv_usec = 0};  // a listener that stops accepting fails the test, not hangs it
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  const int connected = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
  INFO("connect: " << std::strerror(errno) << " (descriptor " << fd << ")");
  REQUIRE(connected == 0);
  return fd;
}
void send_raw(int port, const std::vector<unsigned char>& bytes) {
  const int fd = raw_connection(port);
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the node closed it: what it should do
    sent += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// Whether the other end has closed `fd`, reading what it sent (ZeroMQ's greeting) until then, and
// waiting at most `wait` for it.
bool closed_by_peer(int fd, std::chrono::milliseconds wait) {
  const Clock::time_point until = Clock::now() + wait;
  std::array<char, 256> discard{};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    timeval limit{.tv_sec = left / 1000000, .tv_usec = static_cast<suseconds_t>(left % 1000000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    const ssize_t n = ::recv(fd, discard.data(), discard.size(), 0);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
}

// Room for this many more descriptors than the soft limit may allow (the hard limit permitting).
void allow_descriptors(rlim_t count) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < count) limit.rlim_cur = std::min(count, limit.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// Messages both ways over an accepted pair, every byte checked.
void exchange(Pair& pair) {
  pair.connected->send(text("actor-header"), ranked_bytes(100000, 1).data(), 100000, Clock::now() + 2s);
  std::optional<link::Arrival> at_learner = pair.accepted->receive(Clock::now() + 2s);
  REQUIRE(at_learner);
  check_arrival(*at_learner, 100000, 1, "actor-header");
  auto keep = std::make_shared<std::vector<std::byte>>(ranked_bytes(4 << 20, 2));
  pair.accepted->post(text("weights"), keep->data(), keep->size(), keep, Clock::now() + 2s);
  std::optional<link::Arrival> at_actor = pair.connected->receive(Clock::now() + 2s);
  REQUIRE(at_actor);
  check_arrival(*at_actor, 4 << 20, 2, "weights");
  const auto deadline = Clock::now() + 2s;
  while (pair.accepted->posted() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  CHECK(pair.accepted->posted() == 0);
}

}  // namespace

TEST_CASE("zeromq links carry messages both ways, every byte checked, with the job's credential") {
  const ChannelCredential key = ChannelCredential::generate();
  const auto listener = zeromq::listening_node("127.0.0.1:0", with(key));
  Pair pair = connect_pair(*listener, with(key));
  REQUIRE(pair.accepted);
  exchange(pair);
  pair.connected.reset();  // the actor goes: the learner's link ends with PeerLost
  const auto deadline = Clock::now() + 2s;
  bool lost = false;
  while (!lost && Clock::now() < deadline) {
    try {
      (void)pair.accepted->receive(Clock::now() + 50ms);
    } catch (const PeerLost&) {
      lost = true;
    }
  }
  CHECK(lost);
}

TEST_CASE("a credential round-trips through its text and a key file of mode 0600") {
  const ChannelCredential key = ChannelCredential::generate();
  CHECK(ChannelCredential::from_text(key.secret_text()).public_text() == key.public_text());
  const std::string path = "/tmp/tensortree-test-key-" + std::to_string(::getpid());
  key.save(path);
  CHECK(ChannelCredential::from_file(path).public_text() == key.public_text());
  CHECK_THROWS_AS(key.save(path), InvalidArgument);  // never overwritten
  ::unlink(path.c_str());
  CHECK_THROWS_WITH(ChannelCredential::from_text("short"), Catch::Contains("40 characters"));
  CHECK_THROWS_WITH(ChannelCredential::from_text(std::string(40, '~')), Catch::Contains("not Z85"));
}

TEST_CASE("only the job's peers get in: no key, a wrong key and another job's key are refused before any message") {
  const ChannelCredential key = ChannelCredential::generate();
  const auto listener = zeromq::listening_node("127.0.0.1:0", with(key));
  SECTION("no key at all") {
    zeromq::NodeOptions plain{.credential = std::nullopt, .loopback_without_credential = true, .timeout = 1000ms};
    CHECK_THAT(refused_connect(*listener, plain), Catch::Contains("refused this process's credential"));
  }
  SECTION("a client that knows the listener's public key but holds another secret") {
    // Encrypts to the right server key and proves a different client key: the ZAP handler refuses
    // it, and its message never reaches the node.
    const ChannelCredential other = ChannelCredential::generate();
    zmq::context_t context;
    zmq::socket_t stranger(context, zmq::socket_type::dealer);
    stranger.set(zmq::sockopt::linger, 0);
    stranger.set(zmq::sockopt::curve_serverkey, key.public_text());
    stranger.set(zmq::sockopt::curve_publickey, other.public_text());
    stranger.set(zmq::sockopt::curve_secretkey, other.secret_text());
    stranger.connect("tcp://" + listener->address());
    (void)stranger.send(zmq::buffer(std::string_view("tensortree-link-hello-1")), zmq::send_flags::dontwait);
    const auto deadline = Clock::now() + 2s;
    while (zeromq::refusals(*listener).failed_authentication == 0 && Clock::now() < deadline) {
      CHECK(listener->accept(any_placement(), Clock::now() + 20ms) == nullptr);
    }
    CHECK(zeromq::refusals(*listener).failed_authentication >= 1);
  }
  SECTION("another job's key") {
    CHECK_THAT(refused_connect(*listener, with(ChannelCredential::generate())),
               Catch::Contains("refused this process's credential"));
  }
  // And the job's own peer still gets in afterwards.
  Pair pair = connect_pair(*listener, with(key));
  REQUIRE(pair.accepted);
  exchange(pair);
}

TEST_CASE("without a credential only loopback, by the named opt-in") {
  CHECK_THROWS_WITH(zeromq::listening_node("127.0.0.1:0", {}), Catch::Contains("needs the job's credential"));
  CHECK_THROWS_WITH(zeromq::listening_node("0.0.0.0:0", {.credential = std::nullopt, .loopback_without_credential = true}),
                    Catch::Contains("needs the job's credential"));
  const zeromq::NodeOptions plain{.credential = std::nullopt, .loopback_without_credential = true, .timeout = 1000ms};
  const auto listener = zeromq::listening_node("127.0.0.1:0", plain);
  Pair pair = connect_pair(*listener, plain);
  REQUIRE(pair.accepted);
  exchange(pair);
}

TEST_CASE("errors in the channel's words: a port in use, nothing listening") {
  const ChannelCredential key = ChannelCredential::generate();
  const auto listener = zeromq::listening_node("127.0.0.1:0", with(key));
  CHECK_THROWS_WITH(zeromq::listening_node(listener->address(), with(key)),
                    Catch::Equals(listener->address() + " is already in use"));
  const int free_port = port_of(listener->address());
  std::shared_ptr<link::Node> none = zeromq::connecting_node(with(key));
  CHECK_THROWS_WITH(none->connect("127.0.0.1:1", any_placement(), Clock::now() + 2s),
                    Catch::Contains("nothing listens at 127.0.0.1:1 (is the learner up?)"));
  (void)free_port;
}

TEST_CASE("hostile bytes at the listening port: the node survives, stays idle and keeps serving") {
  const ChannelCredential key = ChannelCredential::generate();
  const auto listener = zeromq::listening_node("127.0.0.1:0", with(key));
  const int port = port_of(listener->address());
  const int descriptors = open_descriptors();
  std::mt19937 random(7);
  std::vector<unsigned char> noise(64 << 10);
  for (unsigned char& byte : noise) byte = static_cast<unsigned char>(random());
  std::vector<unsigned char> header_then_byte(17, 0);
  header_then_byte[0] = 0xFF;  // ZMTP's signature start, a length of 0, then one byte
  for (const std::vector<unsigned char>& garbage :
       {std::vector<unsigned char>(17, 0), noise, std::vector<unsigned char>(10 << 20, 0), header_then_byte}) {
    send_raw(port, garbage);
    CHECK(listener->accept(any_placement(), Clock::now() + 20ms) == nullptr);
  }
  // Half-open connections: connected, silent, closed by the handshake's timeout (1 s here).
  constexpr int kHalfOpen = 1000;
  allow_descriptors(4 * kHalfOpen);
  std::vector<int> silent;
  for (int i = 0; i < kHalfOpen; ++i) silent.push_back(raw_connection(port));
  CHECK(listener->accept(any_placement(), Clock::now() + 1500ms) == nullptr);
  int closed = 0;
  for (const int fd : silent) closed += closed_by_peer(fd, 2000ms) ? 1 : 0;
  CHECK(closed == kHalfOpen);
  for (const int fd : silent) ::close(fd);
  // A byte a second: a handshake that trickles in is cut off by the same timeout.
  const int trickle = raw_connection(port);
  const Clock::time_point trickle_start = Clock::now();
  bool cut_off = false;
  while (!cut_off && Clock::now() - trickle_start < 5s) {
    const unsigned char byte = 0xFF;
    cut_off = ::send(trickle, &byte, 1, MSG_NOSIGNAL) != 1 || closed_by_peer(trickle, 1000ms);
    CHECK(listener->accept(any_placement(), Clock::now()) == nullptr);
  }
  CHECK(cut_off);
  CHECK(Clock::now() - trickle_start < 3s);
  ::close(trickle);
  // Idle once the senders are gone: the node's threads use (almost) no CPU.
  std::this_thread::sleep_for(300ms);
  const double before = cpu_seconds();
  CHECK(listener->accept(any_placement(), Clock::now() + 1000ms) == nullptr);
  CHECK(cpu_seconds() - before < 0.1);
  CHECK(open_descriptors() <= descriptors + 2);
  // The job's peer is served as before.
  Pair pair = connect_pair(*listener, with(key));
  REQUIRE(pair.accepted);
  exchange(pair);
}
