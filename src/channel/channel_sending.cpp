// A tree channel's sending side: the layout once, trees within the peer's credit (send waits for
// it; post keeps the newest tree waiting until the peer has taken the last), keepalives, and an
// orderly close.
#include <thread>
#include <utility>

#include "channel/channel_state.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/transfer.hpp"
#include "wire/wire_header.hpp"
#include "wire/wire_pack.hpp"

namespace tensortree {

using detail::FrameKind;

void TreeChannel::State::send_frame(FrameKind kind, const std::byte* data, std::size_t length) {
  const detail::EncodedFrame header = detail::encode_frame({kind, send_sequence});
  link->send(header.span(), data, length, Clock::now() + options.timeout);
  ++send_sequence;
  last_sent = Clock::now();
}

void TreeChannel::State::post_frame(FrameKind kind, std::shared_ptr<const detail::WireTree> keep,
                                    const detail::Credit& credit) {
  const detail::EncodedFrame header = detail::encode_frame({kind, send_sequence, credit});
  const std::byte* data = keep ? keep->buffer->data() : nullptr;
  const std::size_t length = keep ? keep->message_bytes() : 0;
  link->post(header.span(), data, length, std::move(keep), Clock::now() + options.timeout);
  ++send_sequence;
  last_sent = Clock::now();
}

// Posted, never sent: a receiver must not wait on a peer that is not reading.
void TreeChannel::State::post_credit(const detail::Credit& credit) { post_frame(FrameKind::Credit, nullptr, credit); }

void TreeChannel::State::keep_alive_if_quiet() {
  if (Clock::now() - last_sent < options.timeout / 3) return;
  post_frame(FrameKind::Keepalive, nullptr);
  ++stats.keepalives_sent;
}

// The layout goes first where the peer does not hold it: after a connect, or when it changed.
void TreeChannel::State::send_layout(const Schema& layout) {
  if (sent_schema && sent_fingerprint == layout.fingerprint()) return;
  const std::vector<std::byte> encoded = layout.encode();
  send_frame(FrameKind::Schema, encoded.data(), encoded.size());
  sent_schema = true;
  sent_fingerprint = layout.fingerprint();
  ++stats.schemas_sent;
}

void TreeChannel::State::await_credit(std::uint64_t bytes, Clock::time_point deadline) {
  drain();  // what the peer sent meanwhile (credit, its trees) never waits behind this end's sends
  while (!send_credit.allows(bytes)) {
    throw_if_peer_closed();
    if (Clock::now() >= deadline) {
      throw Timeout(fmt::format("tree channel: {} granted no credit for {} ms ({} trees sent are not taken yet)",
                                link_peer(), options.timeout.count(), send_credit.in_flight()));
    }
    pull(deadline);
  }
}

void TreeChannel::State::send(const detail::Outgoing& out) {
  flush_posts(Clock::now() + options.timeout);
  const std::uint64_t total = out.schema->total_bytes();
  const std::uint64_t message_bytes = total + kWireHeaderBytes;
  await_credit(message_bytes, Clock::now() + options.timeout);
  send_layout(*out.schema);
  detail::write_trailing_header({out.schema->fingerprint(), total, 0}, out.buffer, total);
  send_frame(FrameKind::Data, out.buffer->data(), message_bytes);
  send_credit.sent(message_bytes);
  ++stats.trees_sent;
}

void TreeChannel::State::post(std::shared_ptr<const detail::WireTree> tree) {
  if (tree != last_posted) waiting = std::move(tree);
  progress_posts();
}

// Hands the waiting tree to the link once the one before it has gone and the peer's caller has
// taken every tree sent (so a peer holds at most one posted tree unread), its layout first when
// needed. True when nothing is left to send.
bool TreeChannel::State::progress_posts() {
  if (link->posted() > 0) return false;
  if (!waiting) return true;
  drain();
  if (!send_credit.idle()) return false;
  last_posted = std::move(waiting);
  send_layout(*last_posted->schema);
  const std::uint64_t message_bytes = last_posted->message_bytes();
  post_frame(FrameKind::Data, last_posted);
  send_credit.sent(message_bytes);
  ++stats.trees_sent;
  return link->posted() == 0;
}


bool TreeChannel::State::flush_posts(Clock::time_point until) {
  while (!progress_posts()) {
    if (Clock::now() >= until) return false;
    if (waiting && link->posted() == 0) {
      pull(until);  // the peer's credit
    } else {
      std::this_thread::yield();
    }
  }
  return true;
}

void TreeChannel::State::close_link(Clock::time_point deadline) noexcept {
  if (!link || link->failed()) return;
  try {
    flush_posts(deadline);
    send_frame(FrameKind::Close, nullptr, 0);
  } catch (const Error&) {
  }
}

}  // namespace tensortree
