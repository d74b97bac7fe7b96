#include "channel/packed_tree.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/transfer.hpp"
#include "tree_comm/tree_comm_internal.hpp"
#include "tree_comm/wire.hpp"

namespace tensortree::detail {

std::size_t PackedTree::message_bytes() const { return schema->total_bytes() + kWireHeaderBytes; }

namespace {

StoragePtr take_spare(BufferPool& pool, std::size_t nbytes, Device device) {
  return pool.take(nbytes, device, [&] { return Storage::allocate(nbytes, device); });
}

}  // namespace

Outgoing pack_host_tree(const TensorTree& tree, BufferPool& pool, std::string_view op) {
  const Device device = device_of(tree, op);
  if (!device.is_cpu()) {
    throw NotSupported(fmt::format("{}: the tree is on {}; channels carry host trees (to(cpu) first)", op, device));
  }
  return pack_for_wire(tree, device, kWireHeaderBytes,
                       [&pool](std::size_t nbytes, Device on) { return take_spare(pool, nbytes, on); });
}

std::shared_ptr<const PackedTree> pack_tree(const TensorTree& tree, BufferPool& pool, std::string_view op) {
  Outgoing out = pack_host_tree(tree, pool, op);
  const Device device = out.device;
  const std::uint64_t total = out.schema->total_bytes();
  if (out.buffer == tree.storage()) {
    // The tree's own buffer had the room: the bytes are copied all the same, so that the tree may change.
    StoragePtr copy = take_spare(pool, total + kWireHeaderBytes, device);
    copy_bytes(copy->data(), device, out.buffer->data(), device, total);
    out.buffer = std::move(copy);
  }
  write_wire_header({out.schema->fingerprint(), total, 0}, out.buffer->data() + total, device);
  auto packed = std::make_shared<PackedTree>();
  packed->schema = std::move(out.schema);
  packed->buffer = std::move(out.buffer);
  return packed;
}

}  // namespace tensortree::detail
