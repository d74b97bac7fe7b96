// The byte collectives under the *_object functions, and the envelope that makes a peer's bytes
// checkable before Boost reads them. Everything moves on the CPU transports: sizes first, then bytes.
#include "tensortree/dist_objects.hpp"

#include <array>
#include <cstring>
#include <string>

#include <boost/archive/detail/archive_serializer_map.hpp>
#include <boost/archive/impl/archive_serializer_map.ipp>
#include <boost/archive/impl/basic_binary_iarchive.ipp>
#include <boost/archive/impl/basic_binary_iprimitive.ipp>

#include "comm/dist_internal.hpp"
#include "comm/peer_claims.hpp"
#include "core/envelope.hpp"
#include "core/text_format.hpp"
#include "tensortree/dist_ops.hpp"

// The parts of Boost's binary input archive that live in its .ipp files, instantiated for the
// bounded archive once, here (Boost's own binary_iarchive.cpp does the same for binary_iarchive).
namespace boost::archive {
template class detail::archive_serializer_map<tensortree::dist::detail::BoundedBinaryIArchive>;
template class basic_binary_iprimitive<tensortree::dist::detail::BoundedBinaryIArchive, char, std::char_traits<char>>;
template class basic_binary_iarchive<tensortree::dist::detail::BoundedBinaryIArchive>;
template class binary_iarchive_impl<tensortree::dist::detail::BoundedBinaryIArchive, char, std::char_traits<char>>;
}  // namespace boost::archive

namespace tensortree::dist::detail {

namespace {

using tensortree::detail::EnvelopeFormat;
using tensortree::detail::open_envelope;
using tensortree::detail::seal_envelope;

constexpr EnvelopeFormat kObjectEnvelope{0x4A42'4F54 /* "TOBJ" in little-endian bytes */, 1, "object envelope"};

// A size from the size round: -1 is the root's "my arguments were invalid", anything else
// negative is damage.
constexpr std::int64_t kInvalidRootArguments = -1;

// A CPU tensor viewing the caller's bytes; the operations are synchronous, so the bytes outlive it.
// Sends never write through it, which is why a const buffer may be viewed.
Tensor bytes_tensor(std::span<const std::byte> bytes) {
  return Tensor::from_blob(const_cast<std::byte*>(bytes.data()), {static_cast<std::int64_t>(bytes.size())},
                           DType::UInt8, Device::cpu(), [](void*) {});
}

Bytes copy_of_bytes(const Tensor& view) {
  if (view.dtype() != DType::UInt8 || view.dim() != 1) {
    throw CorruptData(fmt::format("object bytes arrived as a {}{} tensor, not a 1-D uint8 one", view.dtype(),
                                  shape_str(view.shape())));
  }
  Bytes out(view.nbytes());
  if (!out.empty()) std::memcpy(out.data(), view.data_ptr(), out.size());
  return out;
}

std::vector<Bytes> copies_of_bytes(const std::vector<Tensor>& views) {
  std::vector<Bytes> out;
  out.reserve(views.size());
  for (const Tensor& view : views) out.push_back(copy_of_bytes(view));
  return out;
}

// A payload size from the size round: non-negative and within the group's limit, before the
// bytes are allocated.
std::int64_t checked_size(std::int64_t size, int sender, const Group& group, std::string_view op) {
  if (size < 0) {
    throw CorruptData(fmt::format("{}: rank {} announced {} bytes", op, sender, size));
  }
  tensortree::detail::check_peer_claim(group, sender, static_cast<std::uint64_t>(size),
                                       fmt::format("{}: the object payload", op));
  return size;
}

// The root's sizes for scatter_bytes, or kInvalidRootArguments for every rank when its list is wrong.
std::vector<std::int64_t> scatter_sizes(std::span<const Bytes> per_rank, const Group& group) {
  const auto n = static_cast<std::size_t>(group.size());
  if (per_rank.size() != n) return std::vector<std::int64_t>(n, kInvalidRootArguments);
  std::vector<std::int64_t> sizes;
  for (const Bytes& bytes : per_rank) sizes.push_back(static_cast<std::int64_t>(bytes.size()));
  return sizes;
}

}  // namespace

Bytes seal(const std::string& archive) {
  return seal_envelope(kObjectEnvelope, std::as_bytes(std::span(archive.data(), archive.size())));
}

std::string unseal(const Bytes& envelope) {
  const std::span<const std::byte> payload = open_envelope(kObjectEnvelope, envelope);
  return std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
}

void broadcast_bytes(Bytes& bytes, int root, const Group& group) {
  constexpr std::string_view op = "broadcast_object";
  check_member(group, op);
  check_rank(root, "src", group, op);
  const std::array<std::int64_t, 1> mine{static_cast<std::int64_t>(bytes.size())};
  const std::int64_t announced = announce_words(mine, root, group)[0];
  if (group.rank() != root) bytes.resize(static_cast<std::size_t>(checked_size(announced, root, group, op)));
  if (!bytes.empty()) metadata_collectives(group).broadcast(bytes_tensor(bytes), root)->wait();
}

std::vector<Bytes> all_gather_bytes(const Bytes& bytes, const Group& group) {
  return copies_of_bytes(all_gather_variadic_shape(bytes_tensor(bytes), group));
}

std::vector<Bytes> gather_bytes(const Bytes& bytes, int root, const Group& group) {
  return copies_of_bytes(gather_variadic_shape(bytes_tensor(bytes), root, group));
}

Bytes scatter_bytes(std::span<const Bytes> per_rank, int root, const Group& group) {
  constexpr std::string_view op = "scatter_object";
  check_member(group, op);
  check_rank(root, "src", group, op);
  const bool is_root = group.rank() == root;
  const Tensor sizes = is_root ? int64_tensor(scatter_sizes(per_rank, group)) : Tensor{};
  const Tensor my_size = Tensor::empty({1}, {DType::Int64});
  metadata_collectives(group).scatter(my_size, sizes, root)->wait();
  const std::int64_t size = int64_values(my_size)[0];
  if (size == kInvalidRootArguments) {
    throw InvalidArgument(fmt::format("{}: the root (rank {}) passed {} values; the group has {} ranks and needs one "
                                      "per rank", op, root,
                                      is_root ? fmt::to_string(per_rank.size()) : std::string("a list of"),
                                      group.size()));
  }
  ByteExchange exchange;
  Bytes mine;
  if (is_root) {
    for (int peer = 0; peer < group.size(); ++peer) {
      if (peer != root) exchange.send(bytes_tensor(per_rank[static_cast<std::size_t>(peer)]), peer);
    }
    mine = per_rank[static_cast<std::size_t>(root)];
  } else {
    mine.resize(static_cast<std::size_t>(checked_size(size, root, group, op)));
    exchange.recv(bytes_tensor(mine), root);
  }
  exchange.post(group)->wait();
  return mine;
}

void send_bytes(const Bytes& bytes, int dst, const Group& group, int tag) {
  constexpr std::string_view op = "send_object";
  check_member(group, op);
  check_rank(dst, "dst", group, op);
  check_tag(tag, "tag", op);
  const auto send = [&](const Tensor& message) {
    return post_to_peer(group, dst, Device::cpu(), "send",
                        [&](PeerTransport& on) { return on.send(message, dst, tag); });
  };
  // Both go out at once: messages between two ranks on one tag arrive in the order they were sent.
  const WorkPtr size_sent = send(int64_tensor(std::vector<std::int64_t>{static_cast<std::int64_t>(bytes.size())}));
  const WorkPtr bytes_sent = bytes.empty() ? Work::completed() : send(bytes_tensor(bytes));
  size_sent->wait();
  bytes_sent->wait();
}

Bytes recv_bytes(int src, const Group& group, int tag) {
  constexpr std::string_view op = "recv_object";
  check_member(group, op);
  if (src != kAnySource) check_rank(src, "src", group, op);
  check_tag(tag, "tag", op);
  const auto recv = [&](const Tensor& message, int from) {
    return post_to_peer(group, from, Device::cpu(), "recv",
                        [&](PeerTransport& on) { return on.recv(message, from, tag); });
  };
  const Tensor size = Tensor::empty({1}, {DType::Int64});
  const WorkPtr size_received = recv(size, src);
  size_received->wait();
  const int sender = src == kAnySource ? size_received->source_rank() : src;
  Bytes bytes(static_cast<std::size_t>(checked_size(int64_values(size)[0], sender, group, op)));
  if (!bytes.empty()) recv(bytes_tensor(bytes), sender)->wait();
  return bytes;
}

}  // namespace tensortree::dist::detail
