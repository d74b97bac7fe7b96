// The actor processes of the channel tests, started by test_tree_channel with fork and exec:
//   channel_actor ADDRESS ACTOR MODE COUNT ROWS
//   send     connect, send COUNT trees of ROWS rows (channel_trees.hpp), close, exit 0
//   stream   connect, send trees of ROWS rows until killed, pausing COUNT ms after each
//   hostile:KIND  connect through a raw link (with the job's credential, from
//            TENSORTREE_CHANNEL_KEY), send what KIND says (hostile_frames below), then wait (at most
//            20 s) for the learner to end the link
// Exit status 0 when it did what it was told, 1 (with a message on stderr) otherwise.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "channel/channel_frame.hpp"
#include "channel_trees.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree_channel.hpp"
#include "transport/zeromq/zeromq_node.hpp"
#include "wire/wire_header.hpp"

using namespace tensortree;

namespace {

struct RawFrame {
  std::vector<std::byte> header;
  std::vector<std::byte> payload;
};

std::vector<std::byte> frame_header(detail::FrameKind kind, std::uint64_t sequence) {
  const detail::EncodedFrame encoded = detail::encode_frame({kind, sequence});
  return {encoded.span().begin(), encoded.span().end()};
}

// What a hostile actor sends, by mode; every one must end its channel on the learner.
std::vector<RawFrame> hostile_frames(const std::string& mode) {
  using detail::FrameKind;
  const TensorTree tree = test::channel_tree(9, 0, test::kRows).consolidate();
  const Schema& schema = *tree.schema();
  const std::vector<std::byte> encoded = schema.encode();
  if (mode == "garbage") return {{std::vector<std::byte>(16, std::byte{0x5a}), std::vector<std::byte>(4096, std::byte{0x11})}};
  if (mode == "early-data") return {{frame_header(FrameKind::Data, 0), std::vector<std::byte>(4096, std::byte{0x11})}};
  if (mode == "bad-schema") return {{frame_header(FrameKind::Schema, 0), std::vector<std::byte>(300, std::byte{0x33})}};
  if (mode == "out-of-order") return {{frame_header(FrameKind::Keepalive, 5), {}}};
  // Larger than the learner's max_tree_bytes (1 MiB in the test): refused before it is received.
  if (mode == "too-large") return {{frame_header(FrameKind::Data, 0), std::vector<std::byte>(2 << 20, std::byte{0x11})}};
  if (mode == "wrong-fingerprint") {
    std::vector<std::byte> data(schema.total_bytes() + kWireHeaderBytes);
    std::memcpy(data.data(), tree.storage()->data(), schema.total_bytes());
    detail::write_wire_header({schema.fingerprint() + 1, schema.total_bytes(), 0}, data.data() + schema.total_bytes(),
                              Device::cpu());
    return {{frame_header(FrameKind::Schema, 0), encoded}, {frame_header(FrameKind::Data, 1), data}};
  }
  if (mode == "beyond-credit") {  // well-formed trees 0, 1, ..., sent without waiting for credit
    std::vector<RawFrame> frames{{frame_header(FrameKind::Schema, 0), encoded}};
    for (std::uint64_t i = 0; i < 40; ++i) {
      const TensorTree next = test::channel_tree(9, static_cast<std::int64_t>(i), test::kRows).consolidate();
      std::vector<std::byte> data(schema.total_bytes() + kWireHeaderBytes);
      std::memcpy(data.data(), next.storage()->data(), schema.total_bytes());
      detail::write_wire_header({schema.fingerprint(), schema.total_bytes(), 0}, data.data() + schema.total_bytes(),
                                Device::cpu());
      frames.push_back({frame_header(FrameKind::Data, i + 1), std::move(data)});
    }
    return frames;
  }
  throw InvalidArgument("unknown hostile mode " + mode);
}

// Sends the frames through a raw link, then waits (at most 20 s) for the learner to cut it.
int send_hostile(const std::string& address, const std::string& mode) {
  const auto node = zeromq::connecting_node({.credential = ChannelCredential::from_environment()});
  const auto deadline = [](int seconds) { return link::Clock::now() + std::chrono::seconds(seconds); };
  const auto link = node->connect(address, [](auto&&...) -> StoragePtr { return nullptr; }, deadline(10));
  try {
    for (const RawFrame& frame : hostile_frames(mode)) {
      link->send(frame.header, frame.payload.data(), frame.payload.size(), deadline(10));
    }
    // The learner's credit comes first; then nothing, until it ends the link.
    const auto until = deadline(20);
    while (link->receive(until)) {
    }
  } catch (const PeerLost&) {
    return 0;  // the learner refused a message and ended the link
  }
  std::fprintf(stderr, "hostile actor (%s): the learner kept the connection\n", mode.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: channel_actor ADDRESS ACTOR send|stream|hostile:KIND COUNT ROWS\n");
    return 2;
  }
  const std::string address = argv[1];
  const std::int64_t actor = std::atoll(argv[2]);
  const std::string mode = argv[3];
  const std::int64_t count = std::atoll(argv[4]);
  const std::int64_t rows = std::atoll(argv[5]);
  try {
    if (mode.starts_with("hostile:")) return send_hostile(address, mode.substr(8));
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
