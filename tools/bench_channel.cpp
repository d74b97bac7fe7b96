// Tree channels against raw UCX moving one buffer of the same bytes, and against TensorTree's MPI
// send, in one run. Three cases (the table's "tree" is leaves x bytes a leaf): a 64 MiB tree of 4
// leaves (--mib), one tree of 1000 leaves of 256 bytes (--leaves, --leaf-bytes; --leafy-count a
// round), and 1000 trees of one 256-byte leaf (--small-bytes; --count a round). Each in two
// placements:
//
//   localhost    the sender a process on this host, UCX choosing its transport: UCX 1.13 carries
//                these links over TCP on loopback (with UCX_TLS=shm,self they do not connect)
//   namespaces   the sender in a network namespace joined to this one by a veth pair, UCX held to
//                TCP over it on both ends (UCX_TLS=tcp, UCX_NET_DEVICES), as between two hosts;
//                skipped, with a message, where namespaces cannot be made (it needs root)
//
// The receiver is this process; the sender is this program again (--send tcp|raw|channel),
// started per column and paced round by round through a pipe (sender_process.hpp). Columns:
//
//   tcp      a plain TCP socket moving the same bytes into one preallocated buffer
//            (bench_channel_tcp.hpp): the baseline of the channel's goal (channel >= 0.9x tcp)
//   raw      one active message per tree through transport/ucx's links, into one preallocated
//            buffer: no frame checks, no schema, no pool (the floor)
//   channel  the consolidated tree over a TreeChannel (the steady state: its layout went once, in
//            the untimed first message), received with recv() (a pooled tree per message)
//   into     the same, received with recv_into() into a consolidated tree of the layout
//   mpi      TensorTree::send/recv of the same tree between two MPI ranks (bench_channel_mpi,
//            started with mpirun as Open MPI comes, the world group's default host transport:
//            TensorTree's shared memory on localhost, MPI across the namespaces, where mpirun
//            starts rank 1 through `bench_channel --rsh-agent NAMESPACE`); "-" without MPI
//
// Each column runs an untimed round and --rounds timed ones, timed on the receiver from just
// before it lets the sender go until the last message is in; the median round, per message, is
// reported (a round lasts milliseconds: the counts keep it so). The last tree (the last raw
// buffer) is compared with what was sent, every byte, and received into zeros. The *_vs_* columns
// are speeds: the other column's time over the channel's (1 = as fast; the goal is channel >= 0.9x
// tcp). Exits non-zero on a wrong value or a failed side.
//
// --columns runs only some columns (one alone, to profile it: perf record --no-inherit profiles the
// receiver; the senders are processes of their own).
//
//   bench_channel                                  both placements, the trees (as root)
//   bench_channel --placements localhost --mib 2 --leafy-count 10 --count 50 --rounds 2 --csv   (CI)
//   perf record -g --no-inherit bench_channel --placements localhost --columns channel --mib 1 --count 20000
//
// Build both programs: ninja -C build tools/bench_channel tools/bench_channel_mpi.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_channel_placement.hpp"
#include "bench_channel_sender.hpp"
#include "bench_channel_tcp.hpp"
#include "bench_channel_tree.hpp"
#include "bench_table.hpp"
#include "tensortree/channel_credential.hpp"

using namespace tensortree;
using namespace tensortree::bench;

namespace {

struct Config {
  std::int64_t mib = 64;
  std::int64_t leaves = 1000;
  std::int64_t leaf_bytes = 256;
  int leafy_count = 200;
  std::int64_t small_bytes = 256;
  int count = 1000;
  int rounds = 7;
  std::vector<std::string> placements{"localhost", "namespaces"};
  std::vector<std::string> columns{"tcp", "raw", "channel", "into", "mpi"};
};

// One case: `count` trees of `shape` per round.
struct Case {
  TreeShape shape;
  int count;
};

// The cases of a run: the large tree, the tree of many small leaves, many trees of one small leaf.
std::vector<Case> cases_of(const Config& config) {
  return {{{4, (config.mib << 20) / 4}, 1},
          {{config.leaves, config.leaf_bytes}, config.leafy_count},
          {{1, config.small_bytes}, config.count}};
}

// "1000x256B", "4x16MiB": the shape as the table shows it.
std::string label(TreeShape shape) {
  const std::int64_t b = shape.leaf_bytes;
  const std::string size = b % (1 << 20) == 0 ? std::to_string(b >> 20) + "MiB"
                           : b % 1024 == 0    ? std::to_string(b >> 10) + "KiB"
                                              : std::to_string(b) + "B";
  return std::to_string(shape.leaves) + "x" + size;
}

// The sender's command line: this program again, in the sender's role.
std::vector<std::string> sender_args(const char* kind, const std::string& address, Case c) {
  return {std::filesystem::read_symlink("/proc/self/exe"), "--send", kind, "--to", address, "--tree",
          c.shape.text(), "--count", std::to_string(c.count)};
}

// One untimed round and `rounds` timed ones of `count` messages, the sender let go at the start of
// each: the median timed round, per message. The clock starts before the sender is let go: were
// this process descheduled in between, the sender's messages would otherwise queue up untimed.
double receive_rounds(SenderProcess& sender, const Config& config, int count, const std::function<void()>& receive_one) {
  receive_one();  // the untimed first message
  std::vector<double> seconds;
  for (int round = 0; round <= config.rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    sender.go();
    for (int i = 0; i < count; ++i) receive_one();
    if (round > 0) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2] / count;
}

// Receives what the sender sends after its last round until its end closes.
void await_close(const std::function<void()>& receive_one, SenderProcess& sender) {
  sender.stop();
  try {
    for (;;) receive_one();
  } catch (const ChannelClosed&) {  // a channel's sender closed in order
  } catch (const PeerLost&) {       // the raw link's sender went
  }
  check(sender.wait() == 0, "the sender process failed");
}

double raw_column(const Placement& where, Case c, const Config& config) {
  const std::size_t bytes = payload_bytes(make_channel_tree(c.shape));
  const ScopedEnv ucx_env = where.ucx_here();
  const std::shared_ptr<ucx::Node> listener = ucx::listening_node(where.bind_address());
  SenderProcess sender(where.sender_command(sender_args("raw", listener->address(), c)));
  const StoragePtr landing = Storage::allocate(bytes, Device::cpu());
  std::memset(landing->data(), 0, bytes);
  const std::unique_ptr<ucx::Link> link = listener->accept([&](auto&&...) { return landing; }, transfer_deadline());
  check(link != nullptr, "the raw sender did not connect");
  const auto receive_one = [&] { check(link->receive(transfer_deadline()).has_value(), "a raw message did not arrive"); };
  const double seconds = receive_rounds(sender, config, c.count, receive_one);
  await_close(receive_one, sender);
  check(std::memcmp(landing->data(), raw_pattern(bytes).data(), bytes) == 0, "the raw buffer differs from what was sent");
  return seconds;
}

double tcp_column(const Placement& where, Case c, const Config& config) {
  const std::size_t bytes = payload_bytes(make_channel_tree(c.shape));
  asio::io_context io;
  tcp::acceptor acceptor(io, endpoint_of(where.bind_address()));
  SenderProcess sender(where.sender_command(sender_args("tcp", address_of(acceptor.local_endpoint()), c)));
  tcp::socket socket = acceptor.accept();
  std::vector<std::byte> landing(bytes, std::byte{0});
  const auto receive_one = [&] { asio::read(socket, asio::buffer(landing)); };
  const double seconds = receive_rounds(sender, config, c.count, receive_one);
  sender.stop();
  boost::system::error_code end;
  while (!end) asio::read(socket, asio::buffer(landing), end);  // until the sender closes
  check(sender.wait() == 0, "the tcp sender process failed");
  check(std::memcmp(landing.data(), raw_pattern(bytes).data(), bytes) == 0, "the tcp buffer differs from what was sent");
  return seconds;
}

// recv() per message, or recv_into() a tree of the layout (`into`).
double channel_column(const Placement& where, Case c, const Config& config, bool into) {
  const ScopedEnv ucx_env = where.ucx_here();
  TreeListener listener = TreeListener::bind(where.bind_address(), {.timeout = kTransferTimeout});
  SenderProcess sender(where.sender_command(sender_args("channel", listener.address(), c)));
  std::optional<TreeChannel> channel = listener.accept(kTransferTimeout);
  check(channel.has_value(), "the channel's sender did not connect");
  TensorTree received = zeroed_channel_tree(c.shape);
  const double seconds = receive_rounds(sender, config, c.count, [&] {
    if (into) {
      channel->recv_into(received);
    } else {
      received = channel->recv();
    }
  });
  await_close([&] { (void)channel->recv(); }, sender);
  check(received.equal(make_channel_tree(c.shape).consolidate()), "the last tree received differs from the tree sent");
  check(channel->stats().schemas_received == 1, "the layout went more than once");
  return seconds;
}

// The columns' seconds per message; nullopt for a column not run.
struct Times {
  std::optional<double> tcp, raw, recv, into, mpi;
};

void add_row(Table& table, const Placement& where, Case c, const Times& t) {
  const auto us = [](std::optional<double> seconds) { return seconds ? fixed(*seconds * 1e6, 2) : "-"; };
  // The speed of `mine` relative to `other`'s: other's time over mine.
  const auto speed = [](std::optional<double> mine, std::optional<double> other) {
    return mine && other ? fixed(*other / *mine, 2) : "-";
  };
  table.add({where.name(), label(c.shape), std::to_string(payload_bytes(make_channel_tree(c.shape))),
             std::to_string(c.count), us(t.tcp), us(t.raw), us(t.recv), us(t.into), us(t.mpi),
             speed(t.recv, t.tcp), speed(t.recv, t.raw), speed(t.into, t.raw), speed(t.recv, t.mpi),
             speed(t.into, t.mpi)});
}

bool wanted(const Config& config, const char* column) {
  return std::find(config.columns.begin(), config.columns.end(), column) != config.columns.end();
}

void run_placement(const Placement& where, const Config& config, Table& table) {
  for (const Case& c : cases_of(config)) {
    Times t;
    if (wanted(config, "tcp")) t.tcp = tcp_column(where, c, config);
    if (wanted(config, "raw")) t.raw = raw_column(where, c, config);
    if (wanted(config, "channel")) t.recv = channel_column(where, c, config, false);
    if (wanted(config, "into")) t.into = channel_column(where, c, config, true);
    if (wanted(config, "mpi")) t.mpi = where.mpi_seconds_per_message(c.shape, c.count, config.rounds);
    add_row(table, where, c, t);
  }
}

int drive(const Config& config, bool csv) {
  Table table({"placement", "tree", "bytes", "messages", "tcp_us", "raw_us", "channel_us", "into_us", "mpi_us",
               "channel_vs_tcp", "channel_vs_raw", "into_vs_raw", "channel_vs_mpi", "into_vs_mpi"},
              csv);
  int status = 0;
  try {
    for (const std::string& name : config.placements) {
      std::string why;
      const std::unique_ptr<Placement> where = Placement::make(name, why);
      if (!where) {
        std::fprintf(stderr, "bench_channel: placement %s skipped: %s\n", name.c_str(), why.c_str());
        continue;
      }
      run_placement(*where, config, table);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_channel: %s\n", e.what());
    status = 1;
  }
  table.print();
  return status;
}

// The sender's role (--send): see bench_channel_sender.hpp.
int run_sender(const std::string& kind, const std::string& address, const std::string& tree, int count) {
  try {
    const TreeShape shape = TreeShape::parse(tree);
    if (kind == "tcp") {
      send_tcp(address, shape, count);
    } else if (kind == "raw") {
      send_raw(address, shape, count);
    } else {
      send_channel(address, shape, count);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_channel: sender: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--rsh-agent") == 0) return rsh_agent(argc - 2, argv + 2);
  // One job: the channels' credential, inherited by the sender processes this program starts.
  if (std::getenv(kChannelKeyVariable) == nullptr) {
    ::setenv(kChannelKeyVariable, ChannelCredential::generate().secret_text().c_str(), 1);
  }
  CLI::App app{"tree channels against raw UCX and TensorTree's MPI send, on this host and across namespaces"};
  Config config;
  bool csv = false;
  std::string send_kind, send_to;
  std::string tree;
  app.add_option("--mib", config.mib, "bytes of the large tree (4 leaves), in MiB")->check(CLI::PositiveNumber);
  app.add_option("--leaves", config.leaves, "leaves of the tree of many leaves")->check(CLI::PositiveNumber);
  app.add_option("--leaf-bytes", config.leaf_bytes, "bytes of each of its leaves")->check(CLI::Range(8, 1 << 20));
  app.add_option("--leafy-count", config.leafy_count, "trees of many leaves per round")->check(CLI::PositiveNumber);
  app.add_option("--small-bytes", config.small_bytes, "bytes of each small tree (one leaf)")->check(CLI::Range(16, 1 << 20));
  app.add_option("--count", config.count, "small trees per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", config.rounds, "timed rounds (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--placements", config.placements, "localhost, namespaces")
      ->delimiter(',')
      ->check(CLI::IsMember({"localhost", "namespaces"}));
  app.add_option("--columns", config.columns, "tcp, raw, channel, into, mpi (one alone, to profile it)")
      ->delimiter(',')
      ->check(CLI::IsMember({"tcp", "raw", "channel", "into", "mpi"}));
  app.add_flag("--csv", csv, "print CSV instead of a table");
  app.add_option("--send", send_kind, "(the sender process) tcp, raw or channel")
      ->check(CLI::IsMember({"tcp", "raw", "channel"}));
  app.add_option("--to", send_to, "(the sender process) the receiver's address");
  app.add_option("--tree", tree, "(the sender process) the tree: LEAVESxBYTES");
  CLI11_PARSE(app, argc, argv);
  if (!send_kind.empty()) return run_sender(send_kind, send_to, tree, config.count);
  return drive(config, csv);
}
