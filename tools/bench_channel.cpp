// Tree channels against UCX moving one buffer of the same bytes: a 64 MiB tree, and 1000 trees of
// 256 bytes. A sender thread and a receiver thread, each with a UCX node of its own (as two
// processes have; UCX picks the transport, UCX_TLS may force one). The floor ("raw UCX") is one
// active message per buffer through transport/ucx's links, received into one preallocated buffer:
// no frame checks, no schema, no pool. The tree rows send a consolidated tree (the steady state:
// its layout went once, in the untimed first round) and receive with recv() (a pooled tree) or
// recv_into() (into a consolidated tree of the layout). Each round is timed on the receiver from
// the moment both threads are ready until the last message is in; the median round is reported.
// The last tree (and the last raw buffer) is compared with what was sent, every byte. Prints a
// table (or CSV); exits non-zero on a wrong value.
//
//   bench_channel [--mib 64] [--small-bytes 256] [--count 1000] [--rounds 7] [--csv]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/tensortree.hpp"
#include "tensortree/tree_channel.hpp"
#include "transport/ucx/ucx_link.hpp"

using namespace tensortree;
using Clock = std::chrono::steady_clock;

namespace {

struct Config {
  std::int64_t mib = 64;
  std::int64_t small_bytes = 256;
  int count = 1000;
  int rounds = 7;
};

void check(bool ok, const std::string& what) {
  if (!ok) throw CorruptData("bench_channel: " + what);
}

// About `bytes` bytes in four leaves of three dtypes, two of them nested; values non-zero.
TensorTree make_tree(std::int64_t bytes) {
  const std::int64_t rows = bytes >= (1 << 20) ? 1024 : 1;
  const std::int64_t per_leaf = std::max<std::int64_t>(1, bytes / 4 / rows);
  if (bytes < 1024) {
    return TensorTree::from_map({rows}, {{"obs", Tensor::arange({rows, bytes / 4 / rows}, 1.0, 0.5)}});
  }
  return TensorTree::from_map(
      {rows}, {{"obs.pixels", Tensor::arange({rows, per_leaf}, 3.0, 1.0, {.dtype = DType::UInt8})},
               {"obs.state", Tensor::arange({rows, per_leaf / 4}, 1.0, 0.25)},
               {"next.value", Tensor::arange({rows, per_leaf / 8}, 2.0, 0.5, {.dtype = DType::Float64})},
               {"action", Tensor::arange({rows, per_leaf / 8}, 7.0, 3.0, {.dtype = DType::Int64})}});
}

std::size_t payload_bytes(const TensorTree& tree) {
  std::size_t total = 0;
  for (const auto& [path, leaf] : tree.leaves()) total += leaf.nbytes();
  return total;
}

// Runs `rounds` rounds of `count` messages: `setup_*` on each thread first, then one message
// (the connection is made while the receiver progresses), then per round `send_one` `count` times
// and `receive_one` `count` times; at the end the sender closes (`close_sender`) while the
// receiver progresses until it sees the close (`await_close`). The median of the receiver's round
// times after the first, untimed round, per message.
struct Sides {
  std::function<void()> setup_sender, setup_receiver, send_one, receive_one, close_sender, await_close;
};

double run_rounds(int rounds, int count, const Sides& sides) {
  const auto& [setup_sender, setup_receiver, send_one, receive_one, close_sender, await_close] = sides;
  std::barrier sync(2);
  std::vector<double> seconds;
  std::thread sender([&] {
    try {
      setup_sender();
      send_one();
      for (int round = 0; round <= rounds; ++round) {
        sync.arrive_and_wait();
        for (int i = 0; i < count; ++i) send_one();
      }
      close_sender();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_channel: sender: %s\n", e.what());
      std::_Exit(1);
    }
  });
  setup_receiver();
  receive_one();
  for (int round = 0; round <= rounds; ++round) {
    sync.arrive_and_wait();
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < count; ++i) receive_one();
    if (round > 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  await_close();
  sender.join();
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2] / count;
}

// One buffer of `bytes` per message over transport/ucx's links.
double raw_ucx(std::size_t bytes, const Config& config, int count) {
  const auto listener = ucx::listening_node("127.0.0.1:0");
  const std::string address = listener->address();
  const auto deadline = [] { return ucx::Clock::now() + std::chrono::seconds(30); };
  std::vector<std::byte> source(bytes);
  for (std::size_t i = 0; i < bytes; ++i) source[i] = static_cast<std::byte>(i * 7 + 1);
  const StoragePtr landing = Storage::allocate(bytes, Device::cpu());
  std::unique_ptr<ucx::Link> sending, receiving;
  std::shared_ptr<ucx::Node> sender_node;
  const std::byte header[16] = {};
  const double seconds = run_rounds(
      config.rounds, count,
      {.setup_sender =
           [&] {
             sender_node = ucx::connecting_node();
             sending = sender_node->connect(address, [](auto&&...) -> StoragePtr { return nullptr; }, deadline());
           },
       .setup_receiver = [&] { receiving = listener->accept([&](auto&&...) { return landing; }, deadline()); },
       .send_one = [&] { sending->send(header, source.data(), bytes, deadline()); },
       .receive_one = [&] { check(receiving->receive(deadline()).has_value(), "a raw message did not arrive"); },
       .close_sender = [&] { sending.reset(); },
       .await_close =
           [&] {
             try {
               while (receiving->receive(deadline())) {
               }
             } catch (const PeerLost&) {
             }
           }});
  check(std::memcmp(landing->data(), source.data(), bytes) == 0, "the raw buffer differs from what was sent");
  return seconds;
}

// Trees of about `bytes` over a channel, received with recv() or recv_into().
double channel(std::int64_t bytes, const Config& config, int count, bool into) {
  TreeListener listener = TreeListener::bind("127.0.0.1:0", {.timeout = std::chrono::seconds(30)});
  const std::string address = listener.address();
  const TensorTree sent = make_tree(bytes).consolidate();
  std::optional<TreeChannel> sending, receiving;
  TensorTree received = make_tree(bytes).consolidate();
  const double seconds = run_rounds(
      config.rounds, count,
      {.setup_sender = [&] { sending = TreeChannel::connect(address, {.timeout = std::chrono::seconds(30)}); },
       .setup_receiver =
           [&] {
             receiving = listener.accept(std::chrono::seconds(30));
             check(receiving.has_value(), "the channel was not accepted");
           },
       .send_one = [&] { sending->send(sent); },
       .receive_one =
           [&] {
             if (into) {
               receiving->recv_into(received);
             } else {
               received = receiving->recv();
             }
           },
       .close_sender = [&] { sending->close(); },
       .await_close =
           [&] {
             try {
               while (true) (void)receiving->recv();
             } catch (const PeerLost&) {
             }
           }});
  check(received.equal(sent), "the last tree received differs from the tree sent");
  check(receiving->stats().schemas_received == 1, "the layout went more than once");
  return seconds;
}

void add_row(bench::Table& table, const std::string& what, std::size_t bytes, int count, double seconds,
             double raw_seconds, const std::string& goal) {
  table.add({what, std::to_string(bytes), std::to_string(count), bench::fixed(seconds * 1e6, 2),
             bench::fixed(static_cast<double>(bytes) / seconds / 1e9, 3),
             raw_seconds > 0 ? bench::fixed(raw_seconds / seconds, 2) : "-", goal});
}

void run(const Config& config, bench::Table& table) {
  for (const auto& [bytes, count] : {std::pair{config.mib << 20, 1}, std::pair{config.small_bytes, config.count}}) {
    const std::size_t payload = payload_bytes(make_tree(bytes));
    const double raw = raw_ucx(payload, config, count);
    add_row(table, "raw UCX, one buffer", payload, count, raw, raw, "-");
    add_row(table, "channel recv()", payload, count, channel(bytes, config, count, false), raw, ">= 0.9x raw");
    add_row(table, "channel recv_into()", payload, count, channel(bytes, config, count, true), raw, ">= 0.9x raw");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tree channels against raw UCX moving one buffer of the same bytes"};
  Config config;
  bool csv = false;
  app.add_option("--mib", config.mib, "bytes of the large tree, in MiB")->check(CLI::PositiveNumber);
  app.add_option("--small-bytes", config.small_bytes, "bytes of each small tree")->check(CLI::Range(16, 1 << 20));
  app.add_option("--count", config.count, "small trees per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", config.rounds, "timed rounds (the median is reported)")->check(CLI::PositiveNumber);
  app.add_flag("--csv", csv, "print CSV instead of a table");
  CLI11_PARSE(app, argc, argv);
  bench::Table table({"what", "bytes", "messages", "us_per_message", "GB/s", "vs_raw", "goal"}, csv);
  int status = 0;
  try {
    run(config, table);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_channel: %s\n", e.what());
    status = 1;
  }
  table.print();
  return status;
}
