// TensorTree's collectives: broadcast, all_gather, gather and scatter, over dist_ops and the
// Collectives interface (no MPI or NCCL here); reduce and all_reduce are in tree_reductions.cpp.
//
// Broadcast moves one small round (the root's announcement: layout fingerprint, payload and schema
// lengths, device kind) and then the payload, with the schema behind it only the first time the
// root broadcasts that layout on the group. The gathers and scatter move one block per rank:
// [wire header | schema, padded to 64 bytes | payload], each rank's layout its own.
#include <array>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tree/consolidation_access.hpp"
#include "tree/layout_difference.hpp"
#include "comm/collective_check.hpp"
#include "comm/dist_internal.hpp"
#include "comm/peer_claims.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/tree.hpp"
#include "tree_comm/tree_comm_internal.hpp"
#include "tree_comm/group_buffers.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"

namespace tensortree {

namespace {

using detail::LayoutRegistry;
using detail::Outgoing;
using detail::WireHeader;

// The payload starts at the schema's end rounded up, so every leaf keeps its alignment.
std::size_t padded(std::size_t bytes) {
  const std::optional<std::uint64_t> rounded = detail::checked_align_up(bytes, Schema::kAlignment);
  if (!rounded) throw InvalidArgument(fmt::format("a schema of {} bytes cannot be aligned", bytes));
  return static_cast<std::size_t>(*rounded);
}

// Schema bytes as they sit in host or device memory, decoded (CorruptData on any violation).
std::shared_ptr<const Schema> decode_schema_at(const std::byte* at, Device device, std::size_t nbytes) {
  std::vector<std::byte> host(nbytes);
  detail::copy_bytes(host.data(), Device::cpu(), at, device, nbytes);
  return std::make_shared<const Schema>(Schema::decode(host));
}

// What this rank holds before a broadcast or scatter delivers: its tree's layout, or why it has
// none that can take part (kept until the transfer is over, so that no rank is left waiting).
struct Receiver {
  bool empty = true;
  std::shared_ptr<const Schema> schema;
  std::exception_ptr problem;
};

Receiver receiver_of(const TensorTree& tree, std::string_view op) {
  Receiver mine;
  if (tree.empty()) return mine;
  mine.empty = false;
  try {
    mine.schema = detail::layout_of(tree, detail::device_of(tree, op)).schema;
  } catch (...) {
    mine.problem = std::current_exception();
  }
  return mine;
}

// A tree that arrived for this rank (its payload at byte 0 of `payload`): into this rank's tree
// when it has that layout, as this rank's new tree when it holds none, SchemaMismatch otherwise.
void deliver(TensorTree& tree, const Receiver& mine, const StoragePtr& payload, std::shared_ptr<const Schema> schema,
             int root, std::string_view op) {
  if (mine.problem) std::rethrow_exception(mine.problem);
  if (mine.empty) {
    tree = TensorTree::from_consolidated(payload, std::move(schema));
    return;
  }
  if (mine.schema->fingerprint() != schema->fingerprint()) {
    const std::string difference = detail::difference_text(*mine.schema, *schema, "there");
    throw SchemaMismatch(fmt::format("{} from rank {}: the root's tree (layout {:#018x}) differs from this rank's tree "
                                     "(layout {:#018x}){}{}; the tree is unchanged", op, root, schema->fingerprint(),
                                     mine.schema->fingerprint(), difference.empty() ? "" : " ", difference));
  }
  detail::take_payload(tree, *mine.schema, payload, 0);
}

// ---- broadcast ------------------------------------------------------------------------------------------

// The root's announcement, one small round on the host: whether the root could send, and what.
struct Announcement {
  bool ok = false;
  DeviceType device = DeviceType::CPU;
  WireHeader header;
};

enum AnnouncementWord { kOk, kDevice, kFingerprint, kPayload, kSchemaBytes, kAnnouncementWords };

Announcement announce(const Announcement& mine, int root, const Group& group) {
  std::array<std::int64_t, kAnnouncementWords> words{
      mine.ok ? 1 : 0, static_cast<std::int64_t>(mine.device), static_cast<std::int64_t>(mine.header.fingerprint),
      static_cast<std::int64_t>(mine.header.payload_bytes), static_cast<std::int64_t>(mine.header.schema_bytes)};
  const std::vector<std::int64_t> got = dist::detail::announce_words(words, root, group);
  const auto device = static_cast<std::uint64_t>(got[kDevice]);
  if (got[kOk] != 0 && got[kOk] != 1) throw CorruptData("broadcast: the root's announcement is malformed");
  if (device > static_cast<std::uint64_t>(DeviceType::CUDA) || got[kPayload] < 0 || got[kSchemaBytes] < 0) {
    throw CorruptData(fmt::format("broadcast: the root's announcement names device kind {}, {} payload bytes and {} "
                                  "schema bytes", got[kDevice], got[kPayload], got[kSchemaBytes]));
  }
  return {got[kOk] == 1, static_cast<DeviceType>(device),
          {static_cast<std::uint64_t>(got[kFingerprint]), static_cast<std::uint64_t>(got[kPayload]),
           static_cast<std::uint64_t>(got[kSchemaBytes])}};
}

// The data round stays in flight; the registry learns the layout once it has gone out.
WorkPtr broadcast_from_root(const TensorTree& tree, const Group& group) {
  const int root = group.rank();
  const auto registry = LayoutRegistry::of(group);
  Announcement mine;
  Outgoing out;
  std::vector<std::byte> schema_bytes;
  std::exception_ptr failure;
  Device device = Device::cpu();
  try {
    device = detail::device_of(tree, "broadcast");
    const auto schema = detail::layout_of(tree, device).schema;
    if (!registry->published(schema->fingerprint())) schema_bytes = schema->encode();
    out = detail::pack_for_wire(tree, device, schema_bytes.size(), group);
    mine = {true, device.type(), {out.schema->fingerprint(), out.schema->total_bytes(), schema_bytes.size()}};
  } catch (...) {
    failure = std::current_exception();
  }
  announce(mine, root, group);
  if (failure) std::rethrow_exception(failure);
  const std::uint64_t total = out.schema->total_bytes();
  if (!schema_bytes.empty()) detail::forget_trailing_header(out.buffer);  // written over by the schema
  detail::copy_bytes(out.buffer->data() + total, device, schema_bytes.data(), Device::cpu(), schema_bytes.size());
  const Tensor message = detail::storage_bytes(out.buffer, 0, total + schema_bytes.size());
  WorkPtr sent = group.collectives(device).broadcast(message, root);
  if (schema_bytes.empty()) return Work::then(std::move(sent), [buffer = out.buffer] {});
  return Work::then(std::move(sent), [registry, schema = out.schema, buffer = out.buffer] {
    registry->remember(schema);
    registry->mark_published(schema->fingerprint());
  });
}

void receive_broadcast(TensorTree& tree, const Receiver& mine, const Announcement& sent, const StoragePtr& buffer,
                       Device device, int root, LayoutRegistry& registry);

// `tree` is written when the returned Work completes: it must stay where it is until then.
WorkPtr broadcast_to_receiver(TensorTree& tree, int root, const Group& group) {
  const Receiver mine = receiver_of(tree, "broadcast");
  const Announcement sent = announce({}, root, group);
  if (!sent.ok) {
    throw InvalidArgument(fmt::format("broadcast: the root (rank {}) could not send its tree and reported why there; "
                                      "nothing was sent", root));
  }
  const Device device = dist::detail::device_of_kind(sent.device);
  const std::uint64_t total = sent.header.payload_bytes;
  Collectives& collectives = group.collectives(device);
  // The announcement is the root's word: overflow-checked and bounded before anything is allocated.
  // A rank holding a tree of the announced layout expects exactly its payload (and at most a
  // schema within the limit); any other rank, the group's limit for the whole message.
  const bool expected = !mine.empty && !mine.problem && mine.schema->fingerprint() == sent.header.fingerprint;
  if (expected && total != mine.schema->total_bytes()) {
    throw CorruptData(fmt::format("broadcast: the root (rank {}) announced {} payload bytes for layout fingerprint "
                                  "{}, which has {} on this rank", root, total, sent.header.fingerprint,
                                  mine.schema->total_bytes()));
  }
  // The announcement already vouched for the layout: a consolidated tree of it takes the bytes in
  // place, unless a copy of the tree (or anything else) holds its buffer too and must keep its values.
  const bool direct = expected && sent.header.schema_bytes == 0 && tree.is_consolidated() &&
                      tree.storage()->device() == device && !detail::ConsolidationAccess::buffer_shared(tree);
  if (direct) {
    return collectives.broadcast(detail::storage_bytes(tree.storage(), 0, total), root);
  }
  if (expected) detail::check_peer_claim(group, root, sent.header.schema_bytes, "broadcast: the root's schema");
  const std::size_t length = expected ? detail::peer_claim_sum(root, {total, sent.header.schema_bytes}, "broadcast")
                                      : detail::checked_peer_claim(group, root, {total, sent.header.schema_bytes},
                                                                   "broadcast: the root's announced tree");
  // A new tree keeps room for a wire header behind its payload, so that it can be sent on as it is.
  const std::size_t room =
      mine.empty ? std::max<std::size_t>(length, detail::checked_peer_claim(group, root, {total, kWireHeaderBytes},
                                                                            "broadcast: the root's announced tree"))
                 : length;
  const StoragePtr buffer = mine.empty ? Storage::allocate(room, device) : detail::spare_buffer(group, length, device);
  WorkPtr arriving = collectives.broadcast(detail::storage_bytes(buffer, 0, length), root);
  auto registry = LayoutRegistry::of(group);
  return Work::then(std::move(arriving), [target = &tree, mine, sent, buffer, device, root, registry] {
    receive_broadcast(*target, mine, sent, buffer, device, root, *registry);
  });
}

// What a receiver does once the root's bytes are in `buffer`: find the schema, then deliver.
void receive_broadcast(TensorTree& tree, const Receiver& mine, const Announcement& sent, const StoragePtr& buffer,
                       Device device, int root, LayoutRegistry& registry) {
  const std::uint64_t total = sent.header.payload_bytes;
  std::shared_ptr<const Schema> schema;
  if (sent.header.schema_bytes > 0) {
    schema = decode_schema_at(buffer->data() + total, device, sent.header.schema_bytes);
    if (schema->fingerprint() != sent.header.fingerprint || schema->total_bytes() != total) {
      throw CorruptData(fmt::format("broadcast: the schema the root (rank {}) sent does not describe the payload it "
                                    "announced", root));
    }
    registry.remember(schema);
  } else {
    schema = registry.find(sent.header.fingerprint);
    if (!schema && mine.schema && mine.schema->fingerprint() == sent.header.fingerprint) schema = mine.schema;
    if (!schema && mine.empty) {
      throw InvalidArgument(fmt::format("broadcast: the root (rank {}) sent layout fingerprint {} without its schema, "
                                        "and this rank has not seen that layout on this group", root,
                                        sent.header.fingerprint));
    }
    if (!schema) {
      if (mine.problem) std::rethrow_exception(mine.problem);
      throw SchemaMismatch(fmt::format("broadcast from rank {}: the root's tree (layout {:#018x}) differs from this "
                                       "rank's tree (layout {:#018x}), and this rank has not seen the root's layout; "
                                       "the tree is unchanged", root, sent.header.fingerprint,
                                       mine.schema->fingerprint()));
    }
  }
  deliver(tree, mine, buffer, std::move(schema), root, "broadcast");
}

// ---- blocks of the gathers and scatter ----------------------------------------------------------------------

// [wire header | schema, padded | payload] of `tree` on `device`, as a 1-D uint8 tensor.
Tensor block_of(const TensorTree& tree, Device device) {
  const auto schema = detail::layout_of(tree, device).schema;
  const std::vector<std::byte> schema_bytes = schema->encode();
  const std::size_t payload_at = kWireHeaderBytes + padded(schema_bytes.size());
  const std::size_t length = payload_at + schema->total_bytes();
  const StoragePtr buffer = Storage::allocate(length, device);
  detail::write_wire_header({schema->fingerprint(), schema->total_bytes(), schema_bytes.size()}, buffer->data(), device);
  detail::copy_bytes(buffer->data() + kWireHeaderBytes, device, schema_bytes.data(), Device::cpu(), schema_bytes.size());
  const std::size_t gap = payload_at - kWireHeaderBytes - schema_bytes.size();
  if (gap > 0) {
    const std::vector<std::byte> zeros(gap);
    detail::copy_bytes(buffer->data() + kWireHeaderBytes + schema_bytes.size(), device, zeros.data(), Device::cpu(), gap);
  }
  detail::pack_tree(tree, {.device = device, .reuse = detail::sub_storage(buffer, payload_at, schema->total_bytes())});
  return detail::storage_bytes(buffer, 0, length);
}

struct ArrivedTree {
  StoragePtr payload;
  std::shared_ptr<const Schema> schema;
};

// The tree in a block that `sender` contributed; CorruptData when the block contradicts itself.
ArrivedTree tree_in_block(const Tensor& block, int sender, const char* op) {
  const Device device = block.device();
  const auto* first = static_cast<const std::byte*>(block.data_ptr());
  const auto corrupt = [&](const std::string& problem) {
    throw CorruptData(fmt::format("{}: the block from rank {} {}", op, sender, problem));
  };
  if (block.nbytes() < kWireHeaderBytes) corrupt("is shorter than a wire header");
  const WireHeader header = detail::read_wire_header(first, device, detail::rank_name(sender), op);
  const std::size_t room = block.nbytes() - kWireHeaderBytes;
  // Checked: a payload size near 2^64 must not wrap the sum into the block's length.
  if (header.schema_bytes > room ||
      detail::peer_claim_sum(sender, {padded(header.schema_bytes), header.payload_bytes}, op) != room) {
    corrupt(fmt::format("has {} bytes, not the header's {} schema bytes and {} payload bytes", block.nbytes(),
                        header.schema_bytes, header.payload_bytes));
  }
  auto schema = decode_schema_at(first + kWireHeaderBytes, device, header.schema_bytes);
  if (schema->fingerprint() != header.fingerprint || schema->total_bytes() != header.payload_bytes) {
    corrupt("carries a schema that does not match its header");
  }
  const std::size_t payload_at = block.byte_offset() + kWireHeaderBytes + padded(header.schema_bytes);
  return {detail::sub_storage(block.storage(), payload_at, header.payload_bytes), std::move(schema)};
}

std::vector<TensorTree> trees_in_blocks(const std::vector<Tensor>& blocks, const char* op) {
  std::vector<TensorTree> trees;
  trees.reserve(blocks.size());
  for (std::size_t r = 0; r < blocks.size(); ++r) {
    ArrivedTree arrived = tree_in_block(blocks[r], static_cast<int>(r), op);
    trees.push_back(TensorTree::from_consolidated(std::move(arrived.payload), std::move(arrived.schema)));
  }
  return trees;
}

// A Pending whose trees are parsed from `blocks` once they have arrived. The vector's element
// buffer does not move when the Pending does, so the continuation fills it in place.
Pending<std::vector<TensorTree>> trees_when_arrived(Pending<std::vector<Tensor>> blocks, std::size_t count,
                                                    const char* op) {
  Pending<std::vector<TensorTree>> out{nullptr, std::vector<TensorTree>(count)};
  TensorTree* slots = out.result.data();
  auto arrived = std::make_shared<std::vector<Tensor>>(std::move(blocks.result));
  out.work = Work::then(std::move(blocks.work), [arrived, slots, op] {
    std::vector<TensorTree> trees = trees_in_blocks(*arrived, op);
    for (std::size_t r = 0; r < trees.size(); ++r) slots[r] = std::move(trees[r]);
  });
  return out;
}

}  // namespace

TensorTree& TensorTree::broadcast(int src, const Group& group) {
  broadcast_async(src, group)->wait();
  return *this;
}

WorkPtr TensorTree::broadcast_async(int src, const Group& group) {
  dist::detail::check_member(group, "broadcast");
  dist::detail::check_collective({.op = "tree broadcast", .root = src}, group,
                                 [&] { dist::detail::check_rank(src, "src", group, "broadcast"); });
  if (group.rank() == src) return broadcast_from_root(*this, group);
  return broadcast_to_receiver(*this, src, group);
}

std::vector<TensorTree> TensorTree::all_gather(const Group& group) const {
  return std::move(all_gather_async(group).get());
}

Pending<std::vector<TensorTree>> TensorTree::all_gather_async(const Group& group) const {
  dist::detail::check_member(group, "all_gather");
  dist::detail::check_collective({.op = "tree all_gather"}, group, [] {});
  const Tensor block = block_of(*this, detail::device_of(*this, "all_gather"));
  return trees_when_arrived(dist::all_gather_variadic_shape_async(block, group),
                            static_cast<std::size_t>(group.size()), "all_gather");
}

std::vector<TensorTree> TensorTree::gather(int dst, const Group& group) const {
  return std::move(gather_async(dst, group).get());
}

Pending<std::vector<TensorTree>> TensorTree::gather_async(int dst, const Group& group) const {
  dist::detail::check_member(group, "gather");
  dist::detail::check_collective({.op = "tree gather", .root = dst}, group,
                                 [&] { dist::detail::check_rank(dst, "dst", group, "gather"); });
  const Tensor block = block_of(*this, detail::device_of(*this, "gather"));
  const std::size_t count = group.rank() == dst ? static_cast<std::size_t>(group.size()) : 0;
  return trees_when_arrived(dist::gather_variadic_shape_async(block, dst, group), count, "gather");
}

TensorTree& TensorTree::scatter(int src, std::span<const TensorTree> trees, const Group& group) {
  scatter_async(src, trees, group)->wait();
  return *this;
}

WorkPtr TensorTree::scatter_async(int src, std::span<const TensorTree> trees, const Group& group) {
  constexpr const char* op = "scatter";
  dist::detail::check_member(group, op);
  dist::detail::check_collective({.op = "tree scatter", .root = src}, group,
                                 [&] { dist::detail::check_rank(src, "src", group, op); });
  const Receiver mine = receiver_of(*this, op);
  const auto n = static_cast<std::size_t>(group.size());
  // The root's verdict and device kind go first, so that every rank posts the same data round.
  Announcement verdict;
  std::vector<Tensor> blocks;
  std::exception_ptr failure;
  if (group.rank() == src) {
    try {
      if (trees.size() != n) {
        throw InvalidArgument(fmt::format("scatter: the root passed {} trees for a group of {} ranks", trees.size(),
                                          n));
      }
      const Device device = detail::device_of(trees[0], op);
      for (const TensorTree& tree : trees) blocks.push_back(block_of(tree, device));
      verdict = {true, device.type(), {}};
    } catch (...) {
      failure = std::current_exception();
    }
  }
  const Announcement sent = announce(verdict, src, group);
  if (failure) std::rethrow_exception(failure);
  if (!sent.ok) {
    throw InvalidArgument(fmt::format("scatter: the root (rank {}) passed invalid trees and reported why there; "
                                      "nothing was scattered", src));
  }
  if (group.rank() != src) {
    const Tensor nothing = Tensor::empty({0}, {DType::UInt8, dist::detail::device_of_kind(sent.device)});
    blocks.assign(n, nothing);
  }
  Pending<std::vector<Tensor>> arriving = dist::all_to_all_variadic_shape_async(blocks, group);
  auto arrived = std::make_shared<std::vector<Tensor>>(std::move(arriving.result));
  return Work::then(std::move(arriving.work), [target = this, mine, arrived, src, op] {
    ArrivedTree tree = tree_in_block((*arrived)[static_cast<std::size_t>(src)], src, op);
    deliver(*target, mine, tree.payload, std::move(tree.schema), src, op);
  });
}

}  // namespace tensortree
