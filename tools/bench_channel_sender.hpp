// bench_channel's sending end, run as a process of its own (bench_channel --send raw|channel):
// connects to the receiver, sends one untimed message (the connection, and a channel's layout),
// then `count` messages for each byte on its standard input; at end of file it closes its end and
// returns. "raw" sends one buffer of the tree's bytes per message through transport/ucx's links;
// "channel" sends the consolidated tree over a TreeChannel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bench_channel_tree.hpp"
#include "sender_process.hpp"
#include "tensortree/tree_channel.hpp"
#include "transport/ucx/ucx_link.hpp"

namespace tensortree::bench {

inline constexpr std::chrono::seconds kTransferTimeout{30};

inline ucx::Clock::time_point transfer_deadline() { return ucx::Clock::now() + kTransferTimeout; }

// Sends until the receiver says no more rounds, then closes with `close`.
inline void send_rounds(int count, const std::function<void()>& send_one, const std::function<void()>& close) {
  send_one();
  while (SenderProcess::await_go()) {
    for (int i = 0; i < count; ++i) send_one();
  }
  close();
}

inline void send_raw(const std::string& address, TreeShape shape, int count) {
  const std::vector<std::byte> source = raw_pattern(payload_bytes(make_channel_tree(shape)));
  const std::shared_ptr<ucx::Node> node = ucx::connecting_node();
  std::unique_ptr<ucx::Link> link =
      node->connect(address, [](auto&&...) -> StoragePtr { return nullptr; }, transfer_deadline());
  const std::byte header[16] = {};
  send_rounds(
      count, [&] { link->send(header, source.data(), source.size(), transfer_deadline()); }, [&] { link.reset(); });
}

inline void send_channel(const std::string& address, TreeShape shape, int count) {
  const TensorTree tree = make_channel_tree(shape).consolidate();
  TreeChannel channel = TreeChannel::connect(address, {.timeout = kTransferTimeout});
  send_rounds(count, [&] { channel.send(tree); }, [&] { channel.close(); });
}

}  // namespace tensortree::bench
