// The actor processes of the channel tests, started by test_tree_channel with fork and exec:
//   channel_actor ADDRESS ACTOR MODE COUNT ROWS
//   send     connect, send COUNT trees of ROWS rows (channel_trees.hpp), close, exit 0
//   stream   connect, send trees of ROWS rows until killed, pausing COUNT ms after each
//   garbage  connect through a raw link and send one message whose frame header is garbage, then
//            wait (at most 20 s) for the learner to cut the connection
// Exit status 0 when it did what it was told, 1 (with a message on stderr) otherwise.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "channel_trees.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree_channel.hpp"
#include "transport/ucx/ucx_link.hpp"

using namespace tensortree;

namespace {

int send_garbage(const std::string& address) {
  const auto node = ucx::connecting_node();
  const auto deadline = [](int seconds) { return ucx::Clock::now() + std::chrono::seconds(seconds); };
  const auto link = node->connect(address, [](auto&&...) -> StoragePtr { return nullptr; }, deadline(10));
  std::vector<std::byte> header(16, std::byte{0x5a});
  std::vector<std::byte> payload(4096, std::byte{0x11});
  try {
    link->send(header, payload.data(), payload.size(), deadline(10));
    link->receive(deadline(20));
  } catch (const PeerLost&) {
    return 0;  // the learner refused the message and ended the connection
  }
  std::fprintf(stderr, "garbage actor: the learner kept the connection\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: channel_actor ADDRESS ACTOR send|stream|garbage COUNT ROWS\n");
    return 2;
  }
  const std::string address = argv[1];
  const std::int64_t actor = std::atoll(argv[2]);
  const std::string mode = argv[3];
  const std::int64_t count = std::atoll(argv[4]);
  const std::int64_t rows = std::atoll(argv[5]);
  try {
    if (mode == "garbage") return send_garbage(address);
    TreeChannel channel = TreeChannel::connect(address, {.timeout = std::chrono::seconds(10)});
    const bool stream = mode == "stream";
    for (std::int64_t sequence = 0; stream || sequence < count; ++sequence) {
      channel.send(test::channel_tree(actor, sequence, rows));
      if (stream && count > 0) std::this_thread::sleep_for(std::chrono::milliseconds(count));
    }
    channel.close();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "actor %lld (%s): %s\n", static_cast<long long>(actor), mode.c_str(), e.what());
    return 1;
  }
}
