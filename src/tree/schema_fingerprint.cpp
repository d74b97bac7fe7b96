#include "tree/schema_fingerprint.hpp"

#include <cstring>
#include <memory>
#include <new>
#include <string_view>

#include <boost/endian/buffers.hpp>
#include <xxhash.h>

namespace tensortree::detail {

namespace {

// Length-prefixed little-endian fields, so that two different layouts never share a byte string.
// The fields pass through a fixed buffer into a streaming hash: the same hash as of the whole byte
// string, without holding it.
class CanonicalBytes {
 public:
  CanonicalBytes() {
    if (!state_ || XXH3_64bits_reset(state_.get()) != XXH_OK) throw std::bad_alloc();
  }

  void number(std::uint64_t value) {
    const boost::endian::little_uint64_buf_t little(value);
    append(little.data(), sizeof little);
  }
  void text(std::string_view s) {
    number(s.size());
    append(s.data(), s.size());
  }
  template <class P>
  void path(const P& path) {
    number(path.size());
    for (const std::string_view key : path) text(key);
  }
  void shape(const Shape& shape) {
    number(shape.size());
    for (const std::int64_t dim : shape) number(static_cast<std::uint64_t>(dim));
  }
  std::uint64_t hash() {
    flush();
    return XXH3_64bits_digest(state_.get());
  }

 private:
  struct FreeState {
    void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
  };

  void append(const void* data, std::size_t n) {
    if (used_ + n > sizeof buffer_) {
      flush();
      if (n > sizeof buffer_) {
        (void)XXH3_64bits_update(state_.get(), data, n);
        return;
      }
    }
    std::memcpy(buffer_ + used_, data, n);
    used_ += n;
  }
  void flush() {
    (void)XXH3_64bits_update(state_.get(), buffer_, used_);
    used_ = 0;
  }

  std::unique_ptr<XXH3_state_t, FreeState> state_{XXH3_createState()};
  std::size_t used_ = 0;
  char buffer_[16384];
};

}  // namespace

std::uint64_t layout_fingerprint(std::span<const NodeSpec> nodes, std::span<const LeafSpec> leaves,
                                 const PathList& paths, std::uint64_t total_bytes) {
  CanonicalBytes bytes;
  bytes.number(Schema::kFormatVersion);
  bytes.number(leaves.size());
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const LeafSpec& leaf = leaves[i];
    bytes.path(paths[i]);
    bytes.number(static_cast<std::uint64_t>(leaf.dtype));
    bytes.shape(leaf.shape);
    bytes.number(leaf.offset);
    bytes.number(leaf.nbytes);
  }
  bytes.number(nodes.size());
  for (const NodeSpec& node : nodes) {
    bytes.path(node.path);
    bytes.shape(node.batch_size);
  }
  bytes.number(total_bytes);
  return bytes.hash();
}

}  // namespace tensortree::detail
