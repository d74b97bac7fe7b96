// A tree packed for channels once and sent later, by any number of them: what TreeChannel::post
// holds while a slow peer takes its time, and the one copy of a weight version that every actor's
// channel sends. Nobody writes it once packed.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "core/buffer_pool.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tree.hpp"
#include "wire/wire_pack.hpp"

namespace tensortree::detail {

struct WireTree {
  std::shared_ptr<const Schema> schema;
  StoragePtr buffer;  // the payload, then the wire header: the data frame's bytes

  std::size_t message_bytes() const;
};

// `tree`'s bytes in host memory with room for the wire header behind them: for host leaves the
// tree's own consolidated buffer where it has the room, else one from `pool`; for CUDA leaves,
// packed on their device (into their own consolidated buffer, or one from `pool`) and copied into
// page-locked host memory from `pool`: channels stage device trees through the host. The layout
// keeps naming the leaves' device type, so the receiver puts the tree back on a GPU.
Outgoing pack_for_channel(const TensorTree& tree, BufferPool& pool, std::string_view op);

// The same, with the wire header written, in a buffer from `pool` and never the tree's own: the
// tree may change while its packed copy is on its way.
std::shared_ptr<const WireTree> pack_wire_tree(const TensorTree& tree, BufferPool& pool, std::string_view op);

}  // namespace tensortree::detail
