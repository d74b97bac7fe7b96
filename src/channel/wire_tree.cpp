#include "channel/wire_tree.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/transfer.hpp"
#include "wire/byte_moves.hpp"
#include "wire/wire_header.hpp"
#include "wire/wire_pack.hpp"

namespace tensortree::detail {

std::size_t WireTree::message_bytes() const { return schema->total_bytes() + kWireHeaderBytes; }

namespace {

StoragePtr take_spare(BufferPool& pool, std::size_t nbytes, Device device, bool pinned = false) {
  return pool.take(nbytes, device, [&] { return Storage::allocate(nbytes, device, pinned); });
}

}  // namespace

Outgoing pack_for_channel(const TensorTree& tree, BufferPool& pool, std::string_view op) {
  const Device device = device_of(tree, op);
  const auto spare = [&pool](std::size_t nbytes, Device on) { return take_spare(pool, nbytes, on); };
  if (device.is_cpu()) return pack_for_wire(tree, device, kWireHeaderBytes, spare);
  if (!device.is_cuda()) throw NotSupported(fmt::format("{}: channels carry host and CUDA trees, not {}", op, device));
  const Outgoing packed = pack_for_wire(tree, device, 0, spare);
  const std::uint64_t total = packed.schema->total_bytes();
  StoragePtr staged = take_spare(pool, total + kWireHeaderBytes, Device::cpu(), /*pinned=*/true);
  copy_bytes(staged->data(), Device::cpu(), packed.buffer->data(), device, total);
  return {std::move(staged), packed.schema, Device::cpu()};
}

std::shared_ptr<const WireTree> pack_wire_tree(const TensorTree& tree, BufferPool& pool, std::string_view op) {
  Outgoing out = pack_for_channel(tree, pool, op);
  const Device device = out.device;
  const std::uint64_t total = out.schema->total_bytes();
  if (out.buffer == tree.storage()) {
    // The tree's own buffer had the room: the bytes are copied all the same, so that the tree may change.
    StoragePtr copy = take_spare(pool, total + kWireHeaderBytes, device);
    copy_bytes(copy->data(), device, out.buffer->data(), device, total);
    forget_trailing_header(copy);
    out.buffer = std::move(copy);
  }
  write_trailing_header({out.schema->fingerprint(), total, 0}, out.buffer, total);
  auto packed = std::make_shared<WireTree>();
  packed->schema = std::move(out.schema);
  packed->buffer = std::move(out.buffer);
  return packed;
}

}  // namespace tensortree::detail
